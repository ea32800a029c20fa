"""A DeploymentPolicy as the planner sees it: the cap, steps, failure rules and compartments
(``model``), label selectors (``selectors``) and maintenance windows (``windows``)."""
