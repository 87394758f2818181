package worker

import (
	"encoding/json"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/natsqueue"
)

// settleCost tells the queue's fair share what a tenant's text job really
// took, its prompt's and its answer's tokens as its result's usage says,
// in place of the estimate it was charged when pulled: an answer that
// stopped short, or a prompt shorter than its bytes suggested, gives its
// tenant back the turns it was charged for. A result without usage (an
// image, POST /generate's plain text) keeps the estimate.
func settleCost(d *natsqueue.Delivery, res genq.Result) {
	if d.Tenant == "" || res.ContentType != "application/json" {
		return
	}
	var out struct {
		Usage *genq.Usage `json:"usage"`
	}
	if json.Unmarshal(res.Data, &out) != nil || out.Usage == nil {
		return
	}
	d.SettleCost(int64(out.Usage.PromptTokens + out.Usage.CompletionTokens))
}
