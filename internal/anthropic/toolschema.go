package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured"
)

// ToolSchemaError names a refused tool schema as the Messages API names
// its fields: tools.N.input_schema, N the tool's index among body's tools
// (server tools, which genq leaves out of the job, counted), where err
// names it the way of OpenAI's tools[M].function.parameters. Any other
// error comes back as it is.
// A refused response format's schema, named response_format.json_schema.schema,
// is named output_config.format.schema (or output_format.schema, where the
// request used the beta's name).
func ToolSchemaError(body []byte, err error) error {
	var req struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		OutputFormat json.RawMessage `json:"output_format"`
	}
	const format = "response_format.json_schema.schema: "
	if msg := genq.ErrorMessage(err); genq.ErrorCode(err) == genq.Invalid && strings.HasPrefix(msg, format) {
		field := "output_config.format.schema: "
		if json.Unmarshal(body, &req) == nil && len(req.OutputFormat) > 0 && string(req.OutputFormat) != "null" {
			field = "output_format.schema: "
		}
		return genq.WrapError(genq.Invalid, err, field+strings.TrimPrefix(msg, format))
	}
	var tse *structured.ToolSchemaError
	if !errors.As(err, &tse) || json.Unmarshal(body, &req) != nil {
		return err
	}
	for i, t := range req.Tools {
		if t.Name == tse.Tool {
			return genq.WrapError(genq.ErrorCode(err), tse, fmt.Sprintf("tools.%d.input_schema: %s", i, tse.Detail))
		}
	}
	return err
}
