"""Health checks, pure: a query's answer to a typed measurement, and a check's measurements to its
outcome (``analysis``). Which checks of a fleet gate are due is the rollout's
(``rollout.fleetgate``)."""
