"""The stage Job: one package stage (or interrupt) on one node, run as a ``batch/v1`` Job.

Owns what the Job is (``request``: the part of a stage request that shapes the Job, mapped onto
``render``'s spec; ``render``: the manifest, its name, its package ConfigMap's name) and what its end
means (``outcome``: the stage's report from the Job's and its pods' facts). Pure: it never talks to
the API server; the run-stages activity creates, adopts, watches and reads the Job.
"""
