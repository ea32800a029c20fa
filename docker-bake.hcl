# Generated from fleetwright/images/spec.py by `python -m fleetwright.images dockerfiles`: edit that.
# `docker buildx bake` builds the fleetwright and agent images; `docker buildx bake packages`
# builds the catalog's package images. Run from the repository root.
group "default" {
  targets = ["fleetwright", "agent", "temporal"]
}
group "packages" {
  targets = ["package-bind-mount", "package-eks-gpu-setup", "package-gke-cos-tuning", "package-gpu_driver_setup", "package-gpu-health", "package-gpu_node_tuning", "package-kdump", "package-kmod-mitigation", "package-shellscript", "package-tuning"]
}
target "fleetwright" {
  dockerfile = "worker/Dockerfile"
  tags = ["ghcr.io/fleetwright/fleetwright:0.2.0"]
}
target "agent" {
  dockerfile = "agent/Dockerfile"
  tags = ["ghcr.io/fleetwright/agent:0.2.0"]
}
target "temporal" {
  dockerfile = "deploy/temporal/Dockerfile"
  tags = ["ghcr.io/fleetwright/temporal:0.2.0"]
}
target "package-bind-mount" {
  context = "packages/bind-mount"
  tags = ["ghcr.io/fleetwright/packages/bind-mount:1.0.0"]
}
target "package-eks-gpu-setup" {
  context = "packages/eks-gpu-setup"
  tags = ["ghcr.io/fleetwright/packages/eks-gpu-setup:1.0.0"]
}
target "package-gke-cos-tuning" {
  context = "packages/gke-cos-tuning"
  tags = ["ghcr.io/fleetwright/packages/gke-cos-tuning:1.0.0"]
}
target "package-gpu_driver_setup" {
  context = "packages/gpu-driver-setup"
  tags = ["ghcr.io/fleetwright/packages/gpu_driver_setup:1.0.0"]
}
target "package-gpu-health" {
  context = "packages/gpu-health"
  tags = ["ghcr.io/fleetwright/packages/gpu-health:1.0.0"]
}
target "package-gpu_node_tuning" {
  context = "packages/gpu-node-tuning"
  tags = ["ghcr.io/fleetwright/packages/gpu_node_tuning:1.0.0"]
}
target "package-kdump" {
  context = "packages/kdump"
  tags = ["ghcr.io/fleetwright/packages/kdump:1.0.0"]
}
target "package-kmod-mitigation" {
  context = "packages/kmod-mitigation"
  tags = ["ghcr.io/fleetwright/packages/kmod-mitigation:1.0.0"]
}
target "package-shellscript" {
  context = "packages/shellscript"
  tags = ["ghcr.io/fleetwright/packages/shellscript:1.0.0"]
}
target "package-tuning" {
  context = "packages/tuning"
  tags = ["ghcr.io/fleetwright/packages/tuning:1.0.0"]
}
