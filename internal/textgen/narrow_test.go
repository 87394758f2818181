package textgen

import (
	"context"
	"errors"
	"testing"

	"github.com/genq/genq/internal/genq"
)

// TestDeviceNarrowingMatchesHost: narrowing each row to its top-k in the
// step's graph (llama.cpp's backend sampling, here on the CPU backend) and
// sampling the survivors gives the very answers of reading whole rows, for
// greedy and for seeded sampling; requests that need whole rows (logprobs,
// a bias, a grammar) share steps with narrowed ones and answer as they do
// on the host. Greedy also matches the plain one-sequence loop. End-of-turn
// tokens are ignored, so that every answer is 32 tokens long and each
// comparison covers 32 steps, whatever a random model draws: what is
// compared is each prompt's answer on the device and on the host, never
// one prompt's answer with another's, which a random model may make alike.
func TestDeviceNarrowingMatchesHost(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"greedy", Config{Temperature: 0}},
		{"sampled", Config{Temperature: 0.9, TopK: 20, TopP: 0.95, Seed: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := tc.cfg
			base.MaxNewTokens, base.Slots, base.IgnoreEOS = 32, 4, true
			host, device := base, base
			host.DeviceSampling, device.DeviceSampling = "off", "on"
			hb := openTiny(t, genq.VariantB, host)
			db := openTiny(t, genq.VariantB, device)
			if hb.deviceTopK || !db.deviceTopK {
				t.Fatalf("device top-k: host %v, device %v", hb.deviceTopK, db.deviceTopK)
			}
			want := concurrently(t, hb, batchTexts)
			got := concurrently(t, db, batchTexts)
			narrowed := 0
			for slot := range db.slots {
				if db.ctx.DeviceTopK(slot) > 0 {
					narrowed++
				}
			}
			if narrowed == 0 {
				t.Fatal("no slot's rows were narrowed on the device: the comparison proves nothing")
			}
			for i := range want {
				if got[i].Text != want[i].Text {
					t.Errorf("prompt %q:\ndevice %q\nhost   %q", batchTexts[i], got[i].Text, want[i].Text)
				}
				if got[i].Tokens != 32 || want[i].Tokens != 32 {
					t.Errorf("prompt %q: %d tokens on the device, %d on the host; want 32, end-of-turn ignored", batchTexts[i], got[i].Tokens, want[i].Tokens)
				}
			}
			if tc.cfg.Temperature == 0 {
				plain, err := db.GenerateUnbatched(context.Background(), batchTexts[1])
				if err != nil {
					t.Fatal(err)
				}
				if plain != want[1].Text {
					t.Errorf("unbatched %q, narrowed %q", plain, want[1].Text)
				}
			}

			// Whole rows beside narrowed ones.
			chat := func(content string) []genq.Message { return []genq.Message{{Role: "user", Content: content}} }
			seed := int64(9)
			object := chatJob("object", 2)
			object.ResponseFormat = &genq.ResponseFormat{Type: genq.FormatJSONObject}
			jobs := []genq.Job{
				{TextRequest: genq.TextRequest{Messages: chat("narrowed")}},
				{TextRequest: genq.TextRequest{Messages: chat("scored"), Logprobs: true, TopLogprobs: 2, Seed: &seed}},
				{TextRequest: genq.TextRequest{Messages: chat("biased"), LogitBias: map[int32]float64{65: 5}, Seed: &seed}},
				object,
			}
			onHost, errs := jobsTogether(t, hb, jobs)
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			onDevice, errs := jobsTogether(t, db, jobs)
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			for i := range jobs {
				if onDevice[i].Text != onHost[i].Text || len(onDevice[i].Logprobs) != len(onHost[i].Logprobs) {
					t.Errorf("job %d: device %q (%d logprobs), host %q (%d)", i, onDevice[i].Text, len(onDevice[i].Logprobs), onHost[i].Text, len(onHost[i].Logprobs))
				}
			}
		})
	}
}

// Without top-k a sampler needs whole rows: nothing is narrowed.
func TestNoTopKNeedsWholeRows(t *testing.T) {
	b := openTiny(t, genq.VariantB, Config{Temperature: 1, TopP: 0.9, DeviceSampling: "on", MaxNewTokens: 4, Slots: 1})
	if _, err := b.generate(context.Background(), "hi"); err != nil {
		t.Fatal(err)
	}
	if k := b.ctx.DeviceTopK(0); k != 0 {
		t.Fatalf("a sampler without top-k had its rows narrowed to %d", k)
	}
}
