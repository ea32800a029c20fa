"""fleetwright's container images: what goes into each one, and two ways to build them.

``spec`` is the one list of what each image holds (base, Debian packages, Python payload, user,
environment, entrypoint, labels). ``dockerfile`` renders the Dockerfiles from it for users with
Docker or BuildKit; ``offline`` assembles the same images from Debian packages and PyPI wheels into
OCI archives where no base image can be pulled (setup, CI, the real test node). Neither may grow
a second list: a change to an image is a change to ``spec``.
"""
