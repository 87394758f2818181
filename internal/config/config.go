// Package config is genq's configuration reference. Every process declares
// its settings once, in apiconfig, workerconfig and ctlconfig, and parses
// them from there; Markdown writes docs/configuration.md from the same
// declarations (go run ./internal/config/gen, or make configuration), and
// TestConfigurationDoc fails when the file and the code disagree.
package config

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/genq/genq/internal/config/apiconfig"
	"github.com/genq/genq/internal/config/ctlconfig"
	"github.com/genq/genq/internal/config/workerconfig"
	"github.com/genq/genq/internal/envflag"
	"github.com/genq/genq/internal/genq"
)

// File is where the reference lives, from the repository's root.
const File = "docs/configuration.md"

// Command regenerates File.
const Command = "make configuration (go run ./internal/config/gen)"

// Declared is one process's declarations: a Set built over an empty
// environment, so that its defaults are the code's.
type Declared struct {
	Process string
	// Binary is the program the process runs: api, worker or genqctl.
	Binary string
	// Variant is set where the process's defaults depend on it (the
	// worker's): it is declared once per variant.
	Variant genq.Variant
	Set     *envflag.Set
}

// Declarations are every process's, in the reference's order.
func Declarations() []Declared {
	empty := func(string) (string, bool) { return "", false }
	set := func(name string) *envflag.Set { return envflag.NewLookup(name, empty, io.Discard) }
	var out []Declared
	api := set("api")
	new(apiconfig.Config).Register(api)
	out = append(out, Declared{Process: "api", Binary: "api", Set: api})
	for _, v := range genq.Variants {
		w := set("worker")
		new(workerconfig.Config).Register(w, v)
		out = append(out, Declared{Process: "worker", Binary: "worker", Variant: v, Set: w})
	}
	for _, c := range []struct {
		name     string
		register func(*envflag.Set)
	}{
		{ctlconfig.SubmitSection, new(ctlconfig.Submit).Register},
		{ctlconfig.DownloadSection, new(ctlconfig.Download).Register},
		{ctlconfig.DeploySection, new(ctlconfig.Deploy).Register},
		{ctlconfig.ModelsSection, new(ctlconfig.Models).Register},
		{ctlconfig.ListSection, new(ctlconfig.List).Register},
		{ctlconfig.KeysSection, new(ctlconfig.Keys).Register},
	} {
		fs := set(c.name)
		c.register(fs)
		out = append(out, Declared{Process: c.name, Binary: "genqctl", Set: fs})
	}
	return out
}

// PerProcess are the variables several programs read, each for itself:
// their values need not agree, so none is owned and adopted. Every other
// variable is read by one program, or owned by one and adopted by the
// others (envflag.Set.Adopted); TestNoSettingIsGivenTwice holds that.
var PerProcess = []struct {
	Vars []string
	Why  string
}{
	{[]string{"VARIANT"}, "the queue a process joins, as `NATS_URL` names the server: the api and the workers of a deployment are each started for it (genqctl deploy, the compose file and make run set it once for both)"},
	{[]string{"NATS_URL", "NATS_USER", "NATS_PASSWORD", "NATS_TOKEN", "NATS_CREDS", "NATS_TLS_CA", "NATS_TLS_CERT", "NATS_TLS_KEY", "NATS_INBOX_PREFIX", "NATS_REPLY_PREFIXES"},
		"how each process reaches NATS and who it is there: each role has its own user, password and inbox prefix ([protocol.md](protocol.md) §9)"},
	{[]string{"LOG_LEVEL", "METRICS_ADDR"}, "each process's own log and metrics address"},
	{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_HEADERS",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG", "OTEL_SDK_DISABLED"},
		"each process exports its own spans under its own service name ([observability.md](observability.md))"},
	{[]string{"MODELS_FILE", "MODELS", "MODEL_ALIASES"}, "the catalogue of models, as `VARIANT` is the seed's: the api resolves a request's `model` with it and the workers load its models, each from its own copy (the compose file and genqctl deploy give the same to both)"},
	{[]string{"IMAGE_ENGINE", "GENQ_IN_CONTAINER"}, "the worker's image engine and genqctl download's files for it, and genq's images' marker; Dockerfile.worker gives its one build argument and its one ENV to both"},
}

// Prose under a section's heading, where the table needs some.
var sectionProse = map[string]string{
	"NATS connection": "How a process reaches NATS and who it is there. With `NATS_URL` empty the api starts an embedded nats-server ([Embedded NATS server](#embedded-nats-server)).",
	"Queue": "The limits of genq's JetStream streams, consumers and buckets ([protocol.md](protocol.md) §1). The api owns them: at start it creates the assets, or updates them, with these values. " +
		"The workers and `genqctl submit` never write them over: they take the assets as they find them and read back what they need (a worker's ack wait and attempts from its consumer, the heartbeats' life from their bucket), following later changes. " +
		"Started before any api, they create a missing asset with the defaults below, and the api's values replace them when it starts.",
	"Embedded NATS server":           "Used by the api when `NATS_URL` is empty, as `make run` does.",
	"Tracing":                        "OpenTelemetry's standard variables: with no endpoint, tracing is off and costs nothing ([observability.md](observability.md)).",
	"Routing by prefix":              "[text.md](text.md), \"Across workers\". The workers own it: the api routes a conversation's turns only to workers whose heartbeats say they take routed jobs.",
	"Models":                         "The catalogue of models a deployment serves, besides its variant's own ([protocol.md](protocol.md) §1c, [text.md](text.md), \"Many models\").",
	"Text engine":                    "Variants A and B ([text.md](text.md)).",
	"Image engine":                   "Variant C ([image.md](image.md)).",
	"Embedding engine":               "The catalogue's embedding models, on the workers that serve them ([api.md](api.md), \"Embeddings\").",
	"Asynchronous jobs and webhooks": "`POST /v1/jobs` and its webhooks.",
	"Batch API":                      "`POST /v1/files` and `/v1/batches`.",
	ctlconfig.DownloadSection:        "[download.md](download.md).",
	ctlconfig.DeploySection:          "[deploy.md](deploy.md).",
	ctlconfig.KeysSection:            "API keys with tenants and limits in the `GENQ_KEYS` bucket ([api.md](api.md), \"Keys, tenants and limits\").",
}

// entry is one process's (and variant's) declaration of a row's setting.
type entry struct {
	process string
	variant genq.Variant
	s       envflag.Setting
}

// row is one line of a section's table: a variable (or a flag alone) and
// every declaration of it.
type row struct {
	section, key string
	entries      []entry
}

type section struct {
	title string
	rows  []*row
}

// collect groups the declarations into sections and rows, in order of
// first declaration.
func collect(decls []Declared) ([]*section, error) {
	var sections []*section
	bySection := map[string]*section{}
	byKey := map[string]*row{}
	var errs []error
	for _, d := range decls {
		if u := d.Set.Undeclared(); len(u) > 0 {
			errs = append(errs, fmt.Errorf("%s: flags %v are defined past envflag's binders, so the reference does not know them", d.Process, u))
		}
		for _, s := range d.Set.Settings() {
			if s.Section == "" {
				errs = append(errs, fmt.Errorf("%s: %s is declared outside any section (envflag.Set.Section)", d.Process, name(s)))
			}
			sec := bySection[s.Section]
			if sec == nil {
				sec = &section{title: s.Section}
				bySection[s.Section] = sec
				sections = append(sections, sec)
			}
			key := s.Env
			if key == "" {
				key = "--" + s.Flag
			}
			r := byKey[s.Section+"\x00"+key]
			if r == nil {
				r = &row{section: s.Section, key: key}
				byKey[s.Section+"\x00"+key] = r
				sec.rows = append(sec.rows, r)
			}
			if first := r.entries; len(first) > 0 && (first[0].s.Flag != s.Flag || first[0].s.Secret != s.Secret || first[0].s.List != s.List) {
				errs = append(errs, fmt.Errorf("%s: %s and %s declare %s differently (flag, secret or list)", s.Section, first[0].process, d.Process, key))
			}
			r.entries = append(r.entries, entry{process: d.Process, variant: d.Variant, s: s})
		}
	}
	return sections, errors.Join(errs...)
}

func name(s envflag.Setting) string {
	if s.Env != "" {
		return s.Env
	}
	return "--" + s.Flag
}

// Markdown is the reference, docs/configuration.md.
func Markdown() (string, error) {
	decls := Declarations()
	sections, err := collect(decls)
	if err != nil {
		return "", err
	}
	vars := variables(decls)
	var b strings.Builder
	b.WriteString(`# Configuration

<!-- Generated from the settings' declarations by ` + Command + `: do not edit. internal/config's TestConfigurationDoc fails when this file and the code disagree. -->

Every setting of genq's processes, written from the declarations they parse: [internal/config/apiconfig](../internal/config/apiconfig/apiconfig.go) (the api), [workerconfig](../internal/config/workerconfig/workerconfig.go) (the worker) and [ctlconfig](../internal/config/ctlconfig/ctlconfig.go) (genqctl's commands). A setting is an environment variable, a flag, or both; a flag wins over its variable, and a process's ` + "`--help`" + ` lists its flags with the variables' values as defaults.

- An empty variable means the default, except where a setting says *empty: off*: there ` + "`VAR=`" + ` (set, and empty) turns the feature off.
- Secrets have no default, and ` + "`--help`" + ` never shows their values.
- Durations are written like ` + "`30s`, `5m` or `1h30m`" + `; booleans ` + "`true` or `false` (`1`, `0`)" + `.
- **Read by** names the processes that read a setting: ` + "`api`, `worker`" + `, or one of genqctl's commands.

## One owner per setting

No setting has to be given by hand to two processes. Where several need one value, one process owns it and the others adopt it from what the owner publishes:

`)
	// One line per owner and way of adopting, with its variables.
	type adoption struct{ owner, how string }
	var ways []adoption
	names := map[adoption][]string{}
	for _, sec := range sections {
		for _, r := range sec.rows {
			if how := adopted(r); how != "" {
				a := adoption{owners(r), how}
				if names[a] == nil {
					ways = append(ways, a)
				}
				names[a] = append(names[a], fmt.Sprintf("[%s](#%s)", cellKey(r), anchor(sec.title)))
			}
		}
	}
	for _, a := range ways {
		fmt.Fprintf(&b, "- %s, set on the %s: %s.\n", strings.Join(names[a], ", "), a.owner, text(a.how, vars))
	}
	b.WriteString("\nRead by several programs, each for itself, and so adopted by none:\n\n")
	for _, p := range PerProcess {
		list := make([]string, len(p.Vars))
		for i, v := range p.Vars {
			list[i] = "`" + v + "`"
		}
		fmt.Fprintf(&b, "- %s: %s.\n", strings.Join(list, ", "), p.Why)
	}
	b.WriteString("\n## Sections\n\n")
	for _, sec := range sections {
		fmt.Fprintf(&b, "- [%s](#%s)\n", sec.title, anchor(sec.title))
	}
	for _, sec := range sections {
		fmt.Fprintf(&b, "\n## %s\n\n", sec.title)
		if p := sectionProse[sec.title]; p != "" {
			b.WriteString(p + "\n\n")
		}
		b.WriteString(declaredIn(sec) + "\n\n")
		b.WriteString("| Variable | Flag | Default | Read by | Meaning |\n|---|---|---|---|---|\n")
		for _, r := range sec.rows {
			line, err := renderRow(r, vars)
			if err != nil {
				return "", err
			}
			b.WriteString(line + "\n")
		}
	}
	return b.String(), nil
}

// declaredIn links the files that declare a section's settings, each
// once, in the order the section first meets them: the room that reads
// a setting declares and checks it.
func declaredIn(sec *section) string {
	var links []string
	seen := map[string]bool{}
	for _, r := range sec.rows {
		for _, e := range r.entries {
			if f := e.s.File; f != "" && !seen[f] {
				seen[f] = true
				links = append(links, fmt.Sprintf("[%s](../%s)", f, f))
			}
		}
	}
	return "Declared in " + strings.Join(links, ", ") + "."
}

func cellKey(r *row) string {
	if s := r.entries[0].s; s.Env != "" {
		return "`" + s.Env + "`"
	}
	return ""
}

func adopted(r *row) string {
	for _, e := range r.entries {
		if e.s.Adopted != "" {
			return e.s.Adopted
		}
	}
	return ""
}

// processes lists the row's processes, once each, in order.
func processes(r *row) []string {
	var out []string
	for _, e := range r.entries {
		if !slices.Contains(out, e.process) {
			out = append(out, e.process)
		}
	}
	return out
}

func owners(r *row) string { return strings.Join(processes(r), ", ") }

func renderRow(r *row, vars map[string]bool) (string, error) {
	s := r.entries[0].s
	flagCell := ""
	if s.Flag != "" {
		flagCell = "`--" + s.Flag + "`"
	}
	def, err := perProcess(r, func(e entry) string {
		switch {
		case e.s.Secret:
			return "(secret)"
		case e.s.Default == "":
			return ""
		}
		return "`" + e.s.Default + "`"
	}, true)
	if err != nil {
		return "", err
	}
	usage, err := perProcess(r, func(e entry) string {
		u := text(e.s.Usage, vars)
		if e.s.List && e.s.Env != "" {
			u += " (the variable: comma-separated)"
		}
		return u
	}, false)
	if err != nil {
		return "", err
	}
	readBy := owners(r)
	if how := adopted(r); how != "" {
		readBy += "<br>adopted: " + text(how, vars)
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %s |", cellKey(r), flagCell, def, readBy, usage), nil
}

// perProcess renders a row's cell from its entries: one value when every
// process agrees, else each process's (and, where the defaults differ by
// variant, each variant's). A usage must not depend on the variant.
func perProcess(r *row, cell func(entry) string, byVariant bool) (string, error) {
	var order []string
	values := map[string][]string{}
	for _, p := range processes(r) {
		var variants []genq.Variant
		var cells []string
		for _, e := range r.entries {
			if e.process == p {
				variants = append(variants, e.variant)
				cells = append(cells, cell(e))
			}
		}
		v := cells[0]
		if slices.ContainsFunc(cells, func(c string) bool { return c != cells[0] }) {
			if !byVariant {
				return "", fmt.Errorf("%s / %s: %s's help differs by variant; say it once for every variant", r.section, r.key, p)
			}
			// Each value once, with the variants it is theirs.
			var seen []string
			of := map[string][]string{}
			for i, c := range cells {
				if _, ok := of[c]; !ok {
					seen = append(seen, c)
				}
				of[c] = append(of[c], string(variants[i]))
			}
			var parts []string
			for _, c := range seen {
				parts = append(parts, fmt.Sprintf("%s (%s)", orNone(c), strings.Join(of[c], ", ")))
			}
			v = strings.Join(parts, ", ")
		}
		if _, ok := values[v]; !ok {
			order = append(order, v)
		}
		values[v] = append(values[v], p)
	}
	if len(order) == 1 {
		return order[0], nil
	}
	var parts []string
	for _, v := range order {
		parts = append(parts, fmt.Sprintf("%s: %s", strings.Join(values[v], ", "), orNone(v)))
	}
	return strings.Join(parts, "<br>"), nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

var (
	escaper = strings.NewReplacer(`|`, `\|`, `*`, `\*`, `<`, `&lt;`, "`", "\\`")
	word    = regexp.MustCompile(`\b[A-Z][A-Z0-9_]*\b`)
)

// text is a help text as a table cell: Markdown's characters escaped, and
// the names of declared variables as code.
func text(s string, vars map[string]bool) string {
	return word.ReplaceAllStringFunc(escaper.Replace(s), func(w string) string {
		if vars[w] {
			return "`" + w + "`"
		}
		return w
	})
}

// variables are the names of every declared variable.
func variables(decls []Declared) map[string]bool {
	vars := map[string]bool{}
	for _, d := range decls {
		for _, s := range d.Set.Settings() {
			if s.Env != "" {
				vars[s.Env] = true
			}
		}
	}
	return vars
}

// anchor is GitHub's anchor of a heading.
func anchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'):
			b.WriteRune(r)
		}
	}
	return b.String()
}
