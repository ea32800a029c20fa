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
{{- include "fleetwright.imageRef" (dict "image" .Values.image "root" .) -}}
{{- end -}}

{{/* An image value (repository, tag, digest) as a reference: (dict "image" ... "root" $) */}}
{{- define "fleetwright.imageRef" -}}
{{- $image := .image -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $image.repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $image.repository (default .root.Chart.AppVersion $image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The chart's own Temporal runs when no address is given ("true"), else renders nothing. */}}
{{- define "fleetwright.temporalEmbedded" -}}
{{- if not .Values.settings.temporal_address -}}true{{- end -}}
{{- end -}}

{{- define "fleetwright.temporalService" -}}
{{- printf "%s-temporal" (include "fleetwright.fullname" .) -}}
{{- end -}}

{{- define "fleetwright.temporalNamespace" -}}
{{- .Values.settings.temporal_namespace | default "default" -}}
{{- end -}}

{{/* The address every process and the helm test use: the embedded server's Service, or yours. */}}
{{- define "fleetwright.temporalAddress" -}}
{{- if include "fleetwright.temporalEmbedded" . -}}
{{- printf "%s.%s.svc:7233" (include "fleetwright.temporalService" .) .Release.Namespace -}}
{{- else -}}
{{- .Values.settings.temporal_address -}}
{{- end -}}
{{- end -}}

{{/* Scheduling values every pod takes: (dict "values" <a workload's values>) */}}
{{- define "fleetwright.placement" -}}
{{- with .values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
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
