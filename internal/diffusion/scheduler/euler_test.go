package scheduler

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// SD 1.5's scheduler config (PNDMScheduler in the export, run as Euler).
var sd15 = EulerDiscrete{BetaStart: 0.00085, BetaEnd: 0.012, BetaSchedule: "scaled_linear", NumTrainTimesteps: 1000, StepsOffset: 1, TimestepSpacing: "leading", PredictionType: "epsilon"}

func TestEulerTimesteps(t *testing.T) {
	tests := []struct {
		spacing string
		first   []float64
		last    float64
	}{
		// leading: arange(28)·(1000//28) reversed, + steps_offset
		{"leading", []float64{946, 911, 876}, 1},
		// trailing: round(arange(1000, 0, -1000/28)) − 1
		{"trailing", []float64{999, 963, 928}, 35},
		// linspace(0, 999, 28) reversed
		{"linspace", []float64{999, 962, 925}, 0},
	}
	for _, tt := range tests {
		e := sd15
		e.TimestepSpacing = tt.spacing
		ts := e.Timesteps(28)
		if len(ts) != 28 || !slices.Equal(ts[:3], tt.first) || ts[27] != tt.last {
			t.Errorf("%s: timesteps %v … %v, want %v … %v", tt.spacing, ts[:3], ts[27], tt.first, tt.last)
		}
	}
}

func TestEulerSigmas(t *testing.T) {
	// Reference values computed with Python from diffusers' formulas:
	// betas = linspace(√0.00085, √0.012, 1000)², σ = √((1−ᾱ)/ᾱ) at the
	// leading timesteps 946, 911, …, 1.
	ts := sd15.Timesteps(28)
	sigmas := sd15.Sigmas(ts)
	want := map[int]float64{0: 10.721358448874648, 1: 8.848298243611902, 27: 0.04131441199678309, 28: 0}
	for i, w := range want {
		if math.Abs(sigmas[i]-w) > 1e-9*max(1, w) {
			t.Errorf("sigma[%d] = %.15g, want %.15g", i, sigmas[i], w)
		}
	}
	if got, want := sd15.InitNoiseSigma(sigmas), 10.767893340354734; math.Abs(got-want) > 1e-9 {
		t.Errorf("init noise sigma %v, want %v (√(σmax²+1) for leading spacing)", got, want)
	}
	// Between training timesteps the level is interpolated.
	mid := sd15.Sigmas([]float64{500.5})[0]
	lo, hi := sd15.Sigmas([]float64{500})[0], sd15.Sigmas([]float64{501})[0]
	if math.Abs(mid-(lo+hi)/2) > 1e-12 {
		t.Errorf("sigma(500.5) = %v, want the mean of %v and %v", mid, lo, hi)
	}
}

func TestEulerDerivative(t *testing.T) {
	x := []float32{2}
	eps := []float32{0.5}
	sd15.Derivative(x, eps, 3)
	if eps[0] != 0.5 {
		t.Errorf("epsilon prediction: derivative %v, want the prediction itself", eps[0])
	}
	v := sd15
	v.PredictionType = "v_prediction"
	// σ=1: x0 = −v/√2 + x/2 = −0.5/√2 + 1; d = (x − x0)/1 = 1 + 0.5/√2.
	pred := []float32{0.5}
	v.Derivative(x, pred, 1)
	if want := 1 + 0.5/math.Sqrt2; math.Abs(float64(pred[0])-want) > 1e-6 {
		t.Errorf("v prediction: derivative %v, want %v", pred[0], want)
	}
	if got := InputScale(math.Sqrt(3)); math.Abs(got-0.5) > 1e-12 {
		t.Errorf("InputScale(√3) = %v, want 0.5", got)
	}
}

func TestLoadEuler(t *testing.T) {
	tests := []struct {
		json, wantClass, wantSpacing, wantErr string
	}{
		{`{"_class_name":"PNDMScheduler","beta_start":0.00085,"beta_end":0.012,"beta_schedule":"scaled_linear","steps_offset":1}`, "PNDMScheduler", "linspace", ""},
		{`{"_class_name":"EulerDiscreteScheduler","timestep_spacing":"trailing"}`, "EulerDiscreteScheduler", "trailing", ""},
		{`{"_class_name":"FlowMatchEulerDiscreteScheduler"}`, "", "", "not supported"},
		{`{"_class_name":"DDIMScheduler","beta_schedule":"squaredcos_cap_v2"}`, "", "", "beta_schedule"},
		{`{"_class_name":"DDIMScheduler","prediction_type":"sample"}`, "", "", "prediction_type"},
	}
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), "scheduler_config.json")
		if err := os.WriteFile(path, []byte(tt.json), 0o644); err != nil {
			t.Fatal(err)
		}
		e, class, err := LoadEuler(path)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("LoadEuler(%s): err %v, want %q", tt.json, err, tt.wantErr)
			}
			continue
		}
		if err != nil || class != tt.wantClass || e.TimestepSpacing != tt.wantSpacing {
			t.Errorf("LoadEuler(%s) = %q %q, %v; want %q %q", tt.json, class, e.TimestepSpacing, err, tt.wantClass, tt.wantSpacing)
		}
	}
}
