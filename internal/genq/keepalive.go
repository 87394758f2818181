package genq

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
)

// KeepAliveParam is a request's keep_alive as Ollama's users write it: a
// duration ("5m", "1h30m", "0", "-1s") or a number of seconds; any negative
// value keeps the model loaded, 0 unloads it after the answer.
type KeepAliveParam struct {
	// Seconds is nil when the request gave none.
	Seconds *float64
}

func (k *KeepAliveParam) UnmarshalJSON(data []byte) error {
	if bytes.Equal(data, []byte("null")) {
		k.Seconds = nil
		return nil
	}
	var n float64
	if err := json.Unmarshal(data, &n); err == nil {
		k.set(n)
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return keepAliveError(string(data))
	}
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		k.set(n)
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return keepAliveError(s)
	}
	k.set(d.Seconds())
	return nil
}

// set keeps a negative value as KeepForever: the job message knows one.
func (k *KeepAliveParam) set(seconds float64) {
	if seconds < 0 {
		seconds = KeepForever
	}
	k.Seconds = &seconds
}

func keepAliveError(got string) error {
	return &Error{Code: Invalid, Field: "keep_alive", Message: "keep_alive must be a duration (\"5m\", \"0\", \"-1\") or a number of seconds, not " + got}
}
