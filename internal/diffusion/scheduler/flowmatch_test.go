package scheduler

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSigmasSD3(t *testing.T) {
	// Reference values computed with Python from the formula in diffusers'
	// FlowMatchEulerDiscreteScheduler (shift 3, 1000 training steps,
	// 28 inference steps): shift(linspace(1, shift(1/1000), 28)) + [0].
	want := map[int]float64{
		0:  1.0,
		1:  0.987380627557981,
		2:  0.9741077676696991,
		13: 0.7646771037181994,
		26: 0.11090573012938988,
		27: 0.008928571428571005,
		28: 0,
	}
	f := FlowMatchEuler{Shift: 3, NumTrainTimesteps: 1000}
	sigmas := f.Sigmas(28)
	if len(sigmas) != 29 {
		t.Fatalf("%d sigmas, want 29", len(sigmas))
	}
	for i, w := range want {
		if math.Abs(sigmas[i]-w) > 1e-12 {
			t.Errorf("sigma[%d] = %.17g, want %.17g", i, sigmas[i], w)
		}
		if got := f.Timestep(sigmas[i]); math.Abs(got-1000*w) > 1e-9 {
			t.Errorf("timestep[%d] = %v, want %v", i, got, 1000*w)
		}
	}
	for i := 1; i < len(sigmas); i++ {
		if sigmas[i] >= sigmas[i-1] {
			t.Errorf("sigmas not decreasing at %d: %v then %v", i, sigmas[i-1], sigmas[i])
		}
	}
}

func TestSigmasWithoutShiftAreLinear(t *testing.T) {
	f := FlowMatchEuler{Shift: 1, NumTrainTimesteps: 1000}
	// linspace(1, 0.001, 4) = 1, 0.667, 0.334, 0.001
	want := []float64{1, 0.667, 0.334, 0.001, 0}
	got := f.Sigmas(4)
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Errorf("sigma[%d] = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestStep(t *testing.T) {
	x := []float32{1, -2}
	Step(x, []float32{0.5, 4}, 0.75, 0.25) // dt = -0.5
	if x[0] != 0.75 || x[1] != -4 {
		t.Errorf("got %v, want [0.75 -4]", x)
	}
}

func TestLoad(t *testing.T) {
	tests := []struct {
		json    string
		want    FlowMatchEuler
		wantErr string
	}{
		{`{"_class_name":"FlowMatchEulerDiscreteScheduler","shift":3.0,"num_train_timesteps":1000}`, FlowMatchEuler{3, 1000}, ""},
		{`{"_class_name":"FlowMatchEulerDiscreteScheduler"}`, FlowMatchEuler{1, 1000}, ""},
		{`{"_class_name":"PNDMScheduler"}`, FlowMatchEuler{}, "not supported"},
		{`{"_class_name":"FlowMatchEulerDiscreteScheduler","use_dynamic_shifting":true}`, FlowMatchEuler{}, "dynamic"},
		{`{`, FlowMatchEuler{}, "unexpected end"},
	}
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), "scheduler_config.json")
		if err := os.WriteFile(path, []byte(tt.json), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := Load(path)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Load(%s): err %v, want one containing %q", tt.json, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Load(%s) = %+v, %v; want %+v", tt.json, got, err, tt.want)
		}
	}
}
