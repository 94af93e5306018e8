{{/*
Helpers of the claimsched chart. Every helper is prefixed with "claimsched.".
*/}}

{{/* The chart name, truncated to a DNS label. */}}
{{- define "claimsched.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The full name of the release's resources. */}}
{{- define "claimsched.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Chart name and version, for the helm.sh/chart label. */}}
{{- define "claimsched.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every resource. */}}
{{- define "claimsched.labels" -}}
helm.sh/chart: {{ include "claimsched.chart" . }}
{{ include "claimsched.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: claimsched
{{- end }}

{{/* Labels of the chart's CRDs: the common labels, with component "crd". */}}
{{- define "claimsched.crdLabels" -}}
{{- $labels := include "claimsched.labels" . | fromYaml }}
{{- $_ := set $labels "app.kubernetes.io/component" "crd" }}
{{- toYaml $labels }}
{{- end }}

{{/* Labels that select the operator pods. */}}
{{- define "claimsched.selectorLabels" -}}
app.kubernetes.io/name: {{ include "claimsched.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{/* The operator's ServiceAccount name. */}}
{{- define "claimsched.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "claimsched.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The operator image reference: repository@digest, or repository:tag. */}}
{{- define "claimsched.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/* "true" when the operator serves all namespaces (watch.allNamespaces, an opt-in). */}}
{{- define "claimsched.clusterWide" -}}
{{- if .Values.watch.allNamespaces }}
{{- if .Values.watch.namespaces }}
{{- fail "watch: set either allNamespaces or namespaces, not both" }}
{{- end }}true
{{- else }}false{{ end }}
{{- end }}

{{/* The namespaces served when not cluster-wide, as a JSON list: watch.namespaces, or else
the release's own namespace (one team's operator sees one team's ClaimSchedules). */}}
{{- define "claimsched.watchedNamespaces" -}}
{{- toJson (.Values.watch.namespaces | default (list .Release.Namespace)) }}
{{- end }}

{{/* "true" when kopf peering is on: asked for, or implied by several replicas. */}}
{{- define "claimsched.peering" -}}
{{- if or .Values.peering.enabled (gt (int .Values.replicaCount) 1) }}true{{ else }}false{{ end }}
{{- end }}

{{/* The kopf peering name used when peering is on. */}}
{{- define "claimsched.peeringName" -}}
{{- default (include "claimsched.fullname" .) .Values.peering.name }}
{{- end }}

{{/* Annotations of chart-managed CRDs: kept on uninstall unless crds.keep is false. */}}
{{- define "claimsched.crdAnnotations" -}}
{{- if .Values.crds.keep -}}
helm.sh/resource-policy: keep
{{- end }}
{{- end }}

{{/*
The rules the operator needs, as a YAML list. Called with a dict:
  scope: "cluster" (rules of the ClusterRole when serving all namespaces)
         "namespace" (rules of the Role in each watched namespace)
  root: the chart's root context.
Exactly the verbs the operator uses; no wildcards. Keep in step with
operator/claimsched_operator/permissions.py (tests/chart/test_rbac.py compares them).
*/}}
{{- define "claimsched.rbacRules" -}}
{{- $root := .root }}
{{- $peering := eq (include "claimsched.peering" $root) "true" }}
# The operator's own resources: watch them, add its finalizer and progress annotations.
- apiGroups: ["claimsched.io"]
  resources: ["claimschedules"]
  verbs: ["get", "list", "watch", "patch"]
# What it observed goes to the status subresource.
- apiGroups: ["claimsched.io"]
  resources: ["claimschedules/status"]
  verbs: ["patch"]
# Events on the ClaimSchedules (Synced, Invalid, RunFailed, NoLiveAgent, Missed ...).
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
{{- if $root.Values.databaseRefs.enabled }}
# spec.databaseRef: read the Secret that holds a ClaimSchedule's own DSN.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
{{- end }}
{{- if eq .scope "cluster" }}
# kopf notices CRDs that appear, change or go while it serves the whole cluster.
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  verbs: ["list", "watch"]
{{- if $peering }}
# kopf peering between the operator replicas (cluster-wide).
- apiGroups: ["kopf.dev"]
  resources: ["clusterkopfpeerings"]
  verbs: ["get", "list", "watch", "patch", "create"]
{{- end }}
{{- else if $peering }}
# kopf peering between the operator replicas (in each watched namespace).
- apiGroups: ["kopf.dev"]
  resources: ["kopfpeerings"]
  verbs: ["get", "list", "watch", "patch", "create"]
{{- end }}
{{- end }}
