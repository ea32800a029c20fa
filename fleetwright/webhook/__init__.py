"""The admission webhook process: validates NodeProfiles and DeploymentPolicies and taints joining
Nodes that a profile requires before they take work. It never talks to Temporal."""
