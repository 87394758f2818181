package grammar

// What a grammar says of the tools whose schemas were relaxed to compile
// (internal/structured's relax.go): the worker checks their finished calls.

import "encoding/json"

// RelaxedTool is a tool whose parameters schema was relaxed to compile.
type RelaxedTool struct {
	// Name is the tool's name.
	Name string
	// Paths are the JSON pointers of the subschemas relaxed, each with
	// what was done: "#/properties/script: maxLength dropped".
	Paths []string
	// Schema is the tool's whole schema, as the client sent it.
	Schema json.RawMessage
	// Validate checks a call's finished arguments against Schema. It is a
	// func so that what holds a RelaxedTool need not know the validator.
	Validate func(arguments string) error
}

// Check validates a call's finished arguments against the tool's whole
// schema. Its error says where the arguments fail and which keyword, never
// their content; or that they could not be checked.
func (r *RelaxedTool) Check(arguments string) error { return r.Validate(arguments) }

// Relaxed returns the tools whose schemas g relaxed, by name; nil for a
// grammar compiled exactly.
func (g *Grammar) Relaxed() map[string]*RelaxedTool { return g.RelaxedTools }

// RelaxedTool returns the relaxed tool named name, or nil when its schema
// is enforced exactly (or g is nil).
func (g *Grammar) RelaxedTool(name string) *RelaxedTool {
	if g == nil {
		return nil
	}
	return g.RelaxedTools[name]
}
