"""Process lifetime: every child a run starts ends with the run.

lease    the lease pipe, the guard of the agent's process group, and a dead orchestrator told from a live one
service  a service (the grader, the gateway) in its own process and session
wrapper  a process that wraps a command and ends as the command ended
agent    the agent's process group with a deadline: SIGTERM, then SIGKILL
ticker   a background job every few seconds on a daemon thread
"""
