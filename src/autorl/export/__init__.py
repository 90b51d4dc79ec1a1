"""Exports (``autorl export``): of autorl tasks to other harnesses, :mod:`autorl.export.harbor` writing Harbor task
directories whose verifier, :mod:`autorl.export.verifier`, scores the agent's final checkpoint with autorl's grader;
and of recorded runs (:mod:`autorl.export.recorded` says which): as DataFrames (:mod:`autorl.export.frames`), Every
Eval Ever records (:mod:`autorl.export.eee`) and MLflow runs (:mod:`autorl.export.mlflow`)."""
