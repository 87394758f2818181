package deploy

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The types below mirror KEDA's keda.sh/v1alpha1 ScaledObject (spec only),
// field for field and tag for tag, from github.com/kedacore/keda/v2 v2.21.0
// apis/keda/v1alpha1. Importing that package would compile
// controller-runtime's webhook and client packages, expr-lang and client-go's
// event recorder, and its go.mod would pin k8s.io/* and controller-runtime to
// KEDA's versions for the whole module. The status is left out on purpose:
// a rendered manifest has none, and decoding one strictly then fails.

// KEDAGroupVersion is the API version of ScaledObject.
var KEDAGroupVersion = schema.GroupVersion{Group: "keda.sh", Version: "v1alpha1"}

// ScaledObject is KEDA's ScaledObject without its status.
type ScaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ScaledObjectSpec `json:"spec"`
}

// ScaledObjectSpec is KEDA's v1alpha1.ScaledObjectSpec.
type ScaledObjectSpec struct {
	ScaleTargetRef        *ScaleTarget    `json:"scaleTargetRef"`
	PollingInterval       *int32          `json:"pollingInterval,omitempty"`
	InitialCooldownPeriod *int32          `json:"initialCooldownPeriod,omitempty"`
	CooldownPeriod        *int32          `json:"cooldownPeriod,omitempty"`
	IdleReplicaCount      *int32          `json:"idleReplicaCount,omitempty"`
	MinReplicaCount       *int32          `json:"minReplicaCount,omitempty"`
	MaxReplicaCount       *int32          `json:"maxReplicaCount,omitempty"`
	Advanced              *AdvancedConfig `json:"advanced,omitempty"`
	Triggers              []ScaleTriggers `json:"triggers"`
	Fallback              *Fallback       `json:"fallback,omitempty"`
}

// ScaleTarget is KEDA's v1alpha1.ScaleTarget.
type ScaleTarget struct {
	Name                   string `json:"name"`
	APIVersion             string `json:"apiVersion,omitempty"`
	Kind                   string `json:"kind,omitempty"`
	EnvSourceContainerName string `json:"envSourceContainerName,omitempty"`
}

// AdvancedConfig is KEDA's v1alpha1.AdvancedConfig.
type AdvancedConfig struct {
	HorizontalPodAutoscalerConfig *HorizontalPodAutoscalerConfig `json:"horizontalPodAutoscalerConfig,omitempty"`
	RestoreToOriginalReplicaCount bool                           `json:"restoreToOriginalReplicaCount,omitempty"`
	ScalingModifiers              *ScalingModifiers              `json:"scalingModifiers,omitempty"`
}

// HorizontalPodAutoscalerConfig is KEDA's v1alpha1.HorizontalPodAutoscalerConfig.
type HorizontalPodAutoscalerConfig struct {
	Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
	Name     string                                         `json:"name,omitempty"`
}

// ScalingModifiers is KEDA's v1alpha1.ScalingModifiers. KEDA embeds it by
// value; a pointer here keeps an empty one out of the rendered YAML.
type ScalingModifiers struct {
	Formula          string                         `json:"formula,omitempty"`
	Target           string                         `json:"target,omitempty"`
	ActivationTarget string                         `json:"activationTarget,omitempty"`
	MetricType       autoscalingv2.MetricTargetType `json:"metricType,omitempty"`
}

// Fallback is KEDA's v1alpha1.Fallback.
type Fallback struct {
	FailureThreshold int32  `json:"failureThreshold"`
	Replicas         int32  `json:"replicas"`
	Behavior         string `json:"behavior,omitempty"`
}

// ScaleTriggers is KEDA's v1alpha1.ScaleTriggers.
type ScaleTriggers struct {
	Type              string                         `json:"type"`
	Name              string                         `json:"name,omitempty"`
	UseCachedMetrics  bool                           `json:"useCachedMetrics,omitempty"`
	Metadata          map[string]string              `json:"metadata"`
	AuthenticationRef *AuthenticationRef             `json:"authenticationRef,omitempty"`
	MetricType        autoscalingv2.MetricTargetType `json:"metricType,omitempty"`
}

// AuthenticationRef is KEDA's v1alpha1.AuthenticationRef.
type AuthenticationRef struct {
	Name string `json:"name"`
	Kind string `json:"kind,omitempty"`
}
