"""The grading service: the referee that owns evaluation data, the submission store and the scores."""
