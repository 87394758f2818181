package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/genq/genq/internal/config/ctlconfig"
	"github.com/genq/genq/internal/envflag"
	"github.com/genq/genq/internal/natsqueue"
	"github.com/genq/genq/internal/tenant"
)

const keysUsage = `usage: genqctl keys add [--key-stdin] [tenant=NAME rpm=N tpm=N tpd=N images_per_day=N concurrency=N weight=W models=a,b admin=true]
       genqctl keys list
       genqctl keys remove DIGEST-PREFIX | tenant=NAME`

// keyStore is what genqctl keys does to GENQ_KEYS (natsqueue.Conn).
type keyStore interface {
	PutKey(ctx context.Context, d tenant.Digest, t tenant.Tenant) error
	StoredKeys(ctx context.Context) ([]tenant.Key, error)
	DeleteKey(ctx context.Context, d tenant.Digest) error
}

// runKeys handles "genqctl keys": the API keys every api reads from the
// GENQ_KEYS bucket, added, listed and removed without restarting an api.
// A key is printed once, when made, and stored only as its digest.
func runKeys(ctx context.Context, args []string, e env) error {
	if len(args) == 0 || !slices.Contains([]string{"add", "list", "remove"}, args[0]) {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(e.stderr, keysUsage)
			return flag.ErrHelp
		}
		return usageError{keysUsage}
	}
	var c ctlconfig.Keys
	fs := envflag.New("genqctl keys "+args[0], e.getenv, e.stderr)
	c.Register(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return flagError(err)
	}
	settings := natsqueue.DefaultSettings()
	settings.Adopt = true // the api owns the buckets' settings
	conn, err := natsqueue.Dial(ctx, c.NATS, settings, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return err
	}
	defer conn.Close()
	switch args[0] {
	case "add":
		return addKey(ctx, conn, fs.Args(), c.KeyStdin, e)
	case "list":
		return listKeys(ctx, conn, e.stdout)
	}
	return removeKeys(ctx, conn, fs.Args(), e.stdout)
}

// addKey stores a key with the tenant fields: one read from stdin, or one
// made here and printed, the only time it is shown.
func addKey(ctx context.Context, store keyStore, fields []string, fromStdin bool, e env) error {
	key := "sk-genq-" + rand.Text()
	if fromStdin {
		line, err := bufio.NewReader(e.stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read the key: %w", err)
		}
		if key = strings.TrimSpace(line); key == "" || strings.ContainsAny(key, " \t=") {
			return usageError{"--key-stdin: standard input holds no key (one word, without =)"}
		}
	}
	k, err := tenant.ParseLine(key + " " + strings.Join(fields, " "))
	if err != nil {
		return usageError{err.Error()}
	}
	if err := store.PutKey(ctx, k.Digest, k.Tenant); err != nil {
		return err
	}
	if !fromStdin {
		fmt.Fprintln(e.stdout, key)
	}
	fmt.Fprintf(e.stderr, "stored key %s… of tenant %s\n", k.Digest.String()[:12], k.Tenant.Name)
	return nil
}

// listKeys prints GENQ_KEYS' records: digests, never keys.
func listKeys(ctx context.Context, store keyStore, w io.Writer) error {
	keys, err := store.StoredKeys(ctx)
	if err != nil {
		return err
	}
	slices.SortFunc(keys, func(a, b tenant.Key) int { return strings.Compare(a.Tenant.Name, b.Tenant.Name) })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DIGEST\tTENANT\tLIMITS")
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", k.Digest.String()[:12], k.Tenant.Name, describeLimits(k.Tenant))
	}
	return tw.Flush()
}

// describeLimits writes a tenant's limits as API_KEYS_FILE's fields.
func describeLimits(t tenant.Tenant) string {
	var f []string
	for _, l := range []struct {
		name string
		n    int64
	}{{"rpm", t.RPM}, {"tpm", t.TPM}, {"tpd", t.TPD}, {"images_per_day", t.ImagesPerDay}, {"concurrency", t.Concurrency}} {
		if l.n > 0 {
			f = append(f, fmt.Sprintf("%s=%d", l.name, l.n))
		}
	}
	if t.Weight > 0 {
		f = append(f, fmt.Sprintf("weight=%g", t.Weight))
	}
	if len(t.Models) > 0 {
		f = append(f, "models="+strings.Join(t.Models, ","))
	}
	if t.Admin {
		f = append(f, "admin=true")
	}
	if len(f) == 0 {
		return "-"
	}
	return strings.Join(f, " ")
}

// removeKeys removes the keys whose digest starts with the argument (8
// hex digits at least), or every key of tenant=NAME.
func removeKeys(ctx context.Context, store keyStore, args []string, w io.Writer) error {
	if len(args) != 1 {
		return usageError{keysUsage}
	}
	name, byTenant := strings.CutPrefix(args[0], "tenant=")
	if !byTenant && len(args[0]) < 8 {
		return usageError{"a digest prefix has 8 hex digits at least: genqctl keys list shows them"}
	}
	keys, err := store.StoredKeys(ctx)
	if err != nil {
		return err
	}
	removed := 0
	for _, k := range keys {
		if (byTenant && k.Tenant.Name == name) || (!byTenant && strings.HasPrefix(k.Digest.String(), strings.ToLower(args[0]))) {
			if err := store.DeleteKey(ctx, k.Digest); err != nil {
				return err
			}
			removed++
		}
	}
	if removed == 0 {
		return fmt.Errorf("no stored key matches %s", args[0])
	}
	fmt.Fprintf(w, "removed %d key(s)\n", removed)
	return nil
}
