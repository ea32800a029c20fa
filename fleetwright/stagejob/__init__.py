"""The Jobs fleetwright runs on a node: a package stage (or interrupt) and a node gate's validation
container, each a ``batch/v1`` Job.

Owns what a stage Job is (``request``: the part of a stage request that shapes the Job, mapped onto
``render``'s spec; ``render``: the manifest, its name, its package ConfigMap's name), what a
validation Job is (``validation``: its manifest, name and verdict), what both share (``podparts``:
labels, tolerations, the unprivileged context, names) and what a Job's end means (``outcome``: the
report from the Job's and its pods' facts). Pure: it never talks to the API server; the
activities create, adopt, watch and read the Jobs.
"""
