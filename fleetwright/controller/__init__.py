"""The controller process: watches NodeProfiles, DeploymentPolicies and Nodes, starts and signals
each profile's rollout workflow, and mirrors what the workflow published into the NodeProfile's
status. It never changes a node itself (the workflows' activities do)."""
