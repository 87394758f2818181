package openai

import (
	"encoding/json"

	"github.com/genq/genq/internal/genq"
)

// Job types of POST /v1/jobs, the object names of the synchronous routes'
// answers.
const (
	JobChat       = "chat.completion"
	JobCompletion = "completion"
	JobImage      = "image"
	// JobEmbedding is an embeddings request (the route's answer is a
	// list of "embedding" objects); the api reads it itself, with its
	// model's queue, so DecodeJobSubmit does not take it.
	JobEmbedding = "embedding"
)

// JobSubmit is the body of POST /v1/jobs: the body of a synchronous
// route's request, and where to send its outcome.
type JobSubmit struct {
	Type    string          `json:"type"`
	Request json.RawMessage `json:"request"`
	Webhook string          `json:"webhook"`
}

// Limits bound what a request may ask for.
type Limits struct {
	MaxPromptBytes int
	Images         ImageLimits
}

// DecodeJobSubmit reads the body of POST /v1/jobs into job, whose id,
// variant and deadline are set, checked as the synchronous route checks
// it. It returns the submit and the model asked for.
func DecodeJobSubmit(body []byte, lim Limits, job *genq.Job) (JobSubmit, string, error) {
	var req JobSubmit
	if err := Decode(body, &req); err != nil {
		return req, "", err
	}
	model, err := asyncJob(req, lim, job)
	return req, model, err
}

func asyncJob(req JobSubmit, lim Limits, job *genq.Job) (string, error) {
	if len(req.Request) == 0 {
		return "", genq.Errorf(genq.Invalid, "request is required: the body of the synchronous route")
	}
	var params Params
	var err error
	switch req.Type {
	case JobChat, JobCompletion:
		if err := RequireKind(job.Variant, genq.OutputText, "type "+req.Type, ""); err != nil {
			return "", err
		}
		decode := DecodeChat
		if req.Type == JobCompletion {
			decode = DecodeCompletion
		}
		params, err = decode(req.Request, lim.MaxPromptBytes, job)
		if err == nil && params.Choices() > 1 {
			err = genq.Errorf(genq.Invalid, "n must be 1 for an asynchronous job: submit one job per choice")
		}
	case JobImage:
		if err := RequireKind(job.Variant, genq.OutputImage, "type image", ""); err != nil {
			return "", err
		}
		var ir ImageRequest
		if err := Decode(req.Request, &ir); err != nil {
			return "", err
		}
		if ir.N != nil && *ir.N != 1 {
			return "", genq.Errorf(genq.Invalid, "n must be 1 for an asynchronous job: submit one job per image")
		}
		if ir.Stream {
			return "", genq.Errorf(genq.Invalid, "stream is for the synchronous routes: an asynchronous job's result is read whole (GET /v1/jobs/{id} shows its progress)")
		}
		jobs, err := ImageJobs(ir, lim.Images, lim.MaxPromptBytes, *job, nil) // one image: no other id
		if err != nil {
			return "", err
		}
		*job = jobs[0]
		return ir.Model, nil
	default:
		return "", genq.Errorf(genq.Invalid, "type must be %s, %s, %s or %s, not %q", JobChat, JobCompletion, JobImage, JobEmbedding, req.Type)
	}
	if err == nil && job.Stream {
		err = genq.Errorf(genq.Invalid, "stream is for the synchronous routes: an asynchronous job's result is read whole")
	}
	if err == nil {
		err = job.Validate()
	}
	return params.Model, err
}

// RequireKind refuses a request, named by what, for output of kind want
// from variant v, which makes the other kind; hint, if any, ends the
// message.
func RequireKind(v genq.Variant, want genq.OutputKind, what, hint string) error {
	if v.Kind() == want {
		return nil
	}
	makes, needs := "images", "a text variant (A or B)"
	if want == genq.OutputImage {
		makes, needs = "text", "the image variant (C)"
	}
	return genq.Errorf(genq.Invalid, "variant %s makes %s: %s needs %s%s", v, makes, what, needs, hint)
}
