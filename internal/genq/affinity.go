package genq

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
)

// affinityPromptBytes is how much of a raw prompt names the conversation it
// belongs to: a later turn repeats the earlier prompt whole, so any prefix
// of it is stable, and a short one costs nothing to hash.
const affinityPromptBytes = 64

// affinityPromptTokens is the same bound for a prompt given as token ids.
const affinityPromptTokens = 16

// AffinityKey names what every later turn of the job's conversation
// repeats, so a queue can send those turns to the worker whose prefix
// cache holds it. It is a hash: for a chat, of its messages up to and
// including the first user message (the system prompt and the opening
// question), as JSON; for a raw prompt or a job of text alone, of its
// first bytes (or token ids). A job with nothing to key on has "".
// The api cannot tokenize, so the key is a guess at the prefix, never a
// promise: a wrong guess costs only the cache hit.
func (j Job) AffinityKey() string {
	h := sha256.New()
	switch {
	case len(j.Messages) > 0:
		end := len(j.Messages)
		for i, m := range j.Messages {
			if m.Role == RoleUser {
				end = i + 1
				break
			}
		}
		b, err := json.Marshal(j.Messages[:end])
		if err != nil {
			return ""
		}
		h.Write([]byte("messages\x00"))
		h.Write(b)
	case j.Prompt != "":
		h.Write([]byte("prompt\x00"))
		h.Write([]byte(j.Prompt[:min(len(j.Prompt), affinityPromptBytes)]))
	case len(j.PromptTokenIDs) > 0:
		h.Write([]byte("tokens\x00"))
		for _, id := range j.PromptTokenIDs[:min(len(j.PromptTokenIDs), affinityPromptTokens)] {
			h.Write(binary.LittleEndian.AppendUint32(nil, uint32(id)))
		}
	case j.Text != "":
		h.Write([]byte("prompt\x00"))
		h.Write([]byte(j.Text[:min(len(j.Text), affinityPromptBytes)]))
	default:
		return ""
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
