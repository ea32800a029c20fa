{{/* Names: every object is prefixed with the release's fullname; cluster-scoped ones too. */}}
{{- define "fleetwright.fullname" -}}
{{- if contains "fleetwright" .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-fleetwright" .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "fleetwright.labels" -}}
app.kubernetes.io/name: fleetwright
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "worker") */}}
{{- define "fleetwright.selector" -}}
app.kubernetes.io/name: fleetwright
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The package namespace: the engine's setting (settings.engine.package_namespace). */}}
{{- define "fleetwright.packageNamespace" -}}
{{- required "settings.engine.package_namespace: the namespace of the package stage Jobs" (dig "engine" "package_namespace" "" .Values.settings) -}}
{{- end -}}

{{- define "fleetwright.image" -}}
{{- $image := .Values.image -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $image.repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $image.repository (default .Chart.AppVersion $image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "fleetwright.webhookService" -}}
{{- printf "%s-webhook" (include "fleetwright.fullname" .) -}}
{{- end -}}

{{- define "fleetwright.webhookSecret" -}}
{{- printf "%s-webhook-tls" (include "fleetwright.fullname" .) -}}
{{- end -}}

{{/* The restricted Pod Security profile: the operator's own pods need no privilege at all. */}}
{{- define "fleetwright.containerSecurity" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}
