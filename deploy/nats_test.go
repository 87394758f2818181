package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/genq/genq/internal/deploy"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/natsqueue"
)

// shippedNATS are the NATS configurations genq ships, by where they run.
// Both read the users' passwords from the environment.
var shippedNATS = []struct {
	name string
	conf func(t *testing.T) string // a nats-server configuration file
}{
	{"compose", func(*testing.T) string { return filepath.Join(root, "deploy", "nats", "genq.conf") }},
	{"k8s", helmNATSConf},
}

// helmNATSConf writes the part of the Helm chart's configuration that
// deploy/nats/values.yaml adds (config.merge) as a nats-server
// configuration file, the way the chart renders it: JSON, whose "<< $X >>"
// strings become the bare variable reference $X.
func helmNATSConf(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "deploy", "nats", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Config struct {
			Merge map[string]any `json:"merge"`
		} `json:"config"`
	}
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Config.Merge) == 0 {
		t.Fatal("values.yaml has no config.merge: the chart's NATS has no users")
	}
	var conf strings.Builder
	conf.WriteString("port: 4222\nhttp_port: 8222\njetstream { store_dir: /data }\n")
	for _, k := range slices.Sorted(maps.Keys(v.Config.Merge)) {
		var j bytes.Buffer
		enc := json.NewEncoder(&j)
		enc.SetEscapeHTML(false) // "<<", ">" as they are
		if err := enc.Encode(v.Config.Merge[k]); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&conf, "%s: %s", k, helmVariable.ReplaceAllString(j.String(), "$$$1"))
	}
	path := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(path, []byte(conf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// helmVariable is the chart's unquoted variable syntax inside a JSON string.
var helmVariable = regexp.MustCompile(`"<< *\$([A-Za-z0-9_]+) *>>"`)

// startShippedNATS starts nats-server with a shipped configuration, on a
// free loopback port.
func startShippedNATS(t *testing.T, conf string) *server.Server {
	t.Helper()
	for _, role := range []string{"API", "WORKER", "BATCH"} {
		t.Setenv("GENQ_NATS_"+role+"_PASSWORD", "pw-"+strings.ToLower(role))
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("the shipped NATS configuration does not parse: %v", err)
	}
	opts.Host, opts.Port, opts.HTTPPort, opts.StoreDir, opts.NoLog, opts.NoSigs = "127.0.0.1", -1, 0, t.TempDir(), true, true
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}

func TestShippedNATSRefusesAnonymousClients(t *testing.T) {
	for _, tc := range shippedNATS {
		t.Run(tc.name, func(t *testing.T) {
			ns := startShippedNATS(t, tc.conf(t))
			nc, err := nats.Connect(ns.ClientURL(), nats.MaxReconnects(0))
			if err == nil {
				nc.Close()
				t.Fatal("an anonymous client was accepted")
			}
			if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
				t.Fatalf("anonymous connect: %v, want an authorization error", err)
			}
		})
	}
}

// TestShippedNATSUsersAgree: compose and Kubernetes give each role the
// same permissions, and what genqctl deploy renders (each component's
// user, inbox prefix and reply prefixes) fits them.
func TestShippedNATSUsersAgree(t *testing.T) {
	perms := map[string]map[string]*server.Permissions{}
	for _, tc := range shippedNATS {
		// Passwords as genqctl deploy generates them, which nats-server
		// parses as configuration values: they must come out as they went in.
		passwords := map[string]string{}
		for _, role := range []string{"api", "worker", "batch"} {
			pw, err := deploy.NewSecretValue()
			if err != nil {
				t.Fatal(err)
			}
			passwords["genq-"+role] = pw
			t.Setenv("GENQ_NATS_"+strings.ToUpper(role)+"_PASSWORD", pw)
		}
		opts, err := server.ProcessConfigFile(tc.conf(t))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		perms[tc.name] = map[string]*server.Permissions{}
		for _, u := range opts.Users {
			perms[tc.name][u.Username] = u.Permissions
			if u.Password != passwords[u.Username] {
				t.Errorf("%s: user %s's password did not come through the environment intact", tc.name, u.Username)
			}
		}
	}
	compose, k8s := perms["compose"], perms["k8s"]
	if len(compose) != 3 || !reflect.DeepEqual(compose, k8s) {
		t.Fatalf("users differ:\ncompose %s\nk8s     %s", dump(compose), dump(k8s))
	}

	o := deploy.DefaultOptions(genq.VariantB)
	o.GPUs, o.GPUType = 1, "a10g"
	objs, err := deploy.Render(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		d, ok := obj.Typed.(*appsv1.Deployment)
		if !ok {
			continue
		}
		env := map[string]string{}
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		p := k8s[env["NATS_USER"]]
		if p == nil {
			t.Errorf("%s: NATS_USER %q is no shipped user", d.Name, env["NATS_USER"])
			continue
		}
		want := []string{env["NATS_INBOX_PREFIX"] + ".>"}
		if env["NATS_USER"] == "genq-worker" {
			want = append(want, "genq.bell.*") // the tenants' jobs' bell (docs/protocol.md §11)
		}
		if !slices.Equal(p.Subscribe.Allow, want) {
			t.Errorf("%s: user %s may subscribe to %v, want %v: its inbox", d.Name, env["NATS_USER"], p.Subscribe.Allow, want)
		}
		for _, prefix := range strings.Split(env["NATS_REPLY_PREFIXES"], ",") {
			if prefix != "" && !slices.Contains(p.Publish.Allow, prefix+".>") {
				t.Errorf("%s: reply prefix %s is not publishable by %s", d.Name, prefix, env["NATS_USER"])
			}
		}
	}
}

// TestNATSChartPasswordsFromSecret: the chart's nats-server reads each
// role's password from the Secret genqctl deploy and cluster-prereqs.sh
// fill, under the names the configuration refers to.
func TestNATSChartPasswordsFromSecret(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "deploy", "nats", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Container struct {
			Env map[string]struct {
				ValueFrom struct {
					SecretKeyRef struct{ Name, Key string } `json:"secretKeyRef"`
				} `json:"valueFrom"`
			} `json:"env"`
		} `json:"container"`
	}
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{deploy.NATSAPIPasswordKey, deploy.NATSWorkerPasswordKey, deploy.NATSBatchPasswordKey} {
		ref := v.Container.Env[name].ValueFrom.SecretKeyRef
		if ref.Name != deploy.NATSUsersSecret || ref.Key != name {
			t.Errorf("container.env %s = Secret %q key %q, want %s key %s", name, ref.Name, ref.Key, deploy.NATSUsersSecret, name)
		}
	}
}

func dump(v any) string { b, _ := json.Marshal(v); return string(b) }

// TestShippedNATSIsolatesProducers runs a job from the api's user through a
// worker's user while a batch producer listens on the api's inbox and on
// the jobs subjects, and tries to pull from the workers' consumer: it sees
// nothing of the job.
func TestShippedNATSIsolatesProducers(t *testing.T) {
	for _, tc := range shippedNATS {
		t.Run(tc.name, func(t *testing.T) { testIsolation(t, startShippedNATS(t, tc.conf(t))) })
	}
}

func testIsolation(t *testing.T, ns *server.Server) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := natsqueue.DefaultSettings()
	dial := func(user, inbox string) *natsqueue.Conn {
		c, err := natsqueue.Dial(ctx, natsqueue.ConnectOptions{URL: ns.ClientURL(), User: "genq-" + user,
			Password: "pw-" + user, InboxPrefix: inbox, ReplyPrefixes: "_INBOX_api,_INBOX_batch"}, s, log, genq.VariantB)
		if err != nil {
			t.Fatalf("%s: %v", user, err)
		}
		t.Cleanup(c.Close)
		return c
	}
	api, worker, batch := dial("api", "_INBOX_api"), dial("worker", "_INBOX_worker"), dial("batch", "_INBOX_batch")

	var mu sync.Mutex
	var seen, denied []string
	batch.NATS().SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		mu.Lock()
		defer mu.Unlock()
		denied = append(denied, err.Error())
	})
	for _, subject := range []string{"_INBOX.>", "_INBOX_api.>", "genq.jobs.>", ">"} {
		if _, err := batch.NATS().Subscribe(subject, func(m *nats.Msg) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, m.Subject)
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.NATS().Flush(); err != nil {
		t.Fatal(err)
	}

	client, err := natsqueue.NewClient(api)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		p, err := worker.NewPuller(ctx, genq.VariantB)
		if err != nil {
			t.Error(err)
			return
		}
		// Two jobs: the api's interactive one, then the batch role's.
		for served := 0; served < 2 && ctx.Err() == nil; {
			d, err := p.Next(time.Second)
			if err != nil || d == nil {
				continue
			}
			served++
			// The api's async jobs (store) get a running mark from the worker.
			if err := d.MarkRunning(ctx); err != nil {
				t.Errorf("the worker could not mark %s running: %v", d.Job.ID, err)
			}
			if !worker.ReplyAllowed(d.Job.ReplyTo) {
				t.Errorf("the reply subject %q is not allowed", d.Job.ReplyTo)
			}
			if err := d.Complete(ctx, genq.NewTextResult("secret answer"), natsqueue.ReplyMeta{Worker: "w"}); err != nil {
				t.Error(err)
			}
		}
	}()
	// The api keeps records of its async jobs; the worker marks them running.
	store := natsqueue.NewJobStore(client)
	if err := store.PutJobRecord(ctx, "job-1", []byte("{}")); err != nil {
		t.Fatalf("the api could not write a job record: %v", err)
	}
	job := genq.Job{Envelope: genq.Envelope{ID: "job-1", Variant: genq.VariantB, Text: "secret prompt", Store: true, Deadline: time.Now().Add(20 * time.Second)}}
	answer, err := client.Run(ctx, job)
	if err != nil {
		t.Fatalf("the api's job did not run under the shipped users: %v", err)
	}
	body, _ := io.ReadAll(answer.Body)
	answer.Body.Close()
	if !strings.Contains(string(body), "secret answer") {
		t.Fatalf("answer %q", body)
	}
	if running, _, err := store.Running(ctx, "job-1"); !running || err != nil {
		t.Fatalf("job-1 running mark: %v, %v", running, err)
	}

	// The batch role queues batch jobs, which the worker runs and acks.
	batchClient, err := natsqueue.NewBatchClient(batch)
	if err != nil {
		t.Fatal(err)
	}
	answer, err = batchClient.Run(ctx, genq.Job{Envelope: genq.Envelope{ID: "batch-1", Variant: genq.VariantB, Text: "batch prompt", Deadline: time.Now().Add(20 * time.Second)}})
	if err != nil {
		t.Fatalf("the batch role's job did not run under the shipped users: %v", err)
	}
	answer.Body.Close()
	// It may not publish interactive jobs: those are the api's.
	if err := batch.NATS().Publish(natsqueue.JobsSubject(genq.VariantB), []byte("{}")); err != nil {
		t.Fatal(err)
	}

	// The api may route a job to one worker's subject (routing by prefix);
	// the batch role may not.
	apiJS, err := jetstream.New(api.NATS())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := apiJS.Publish(ctx, natsqueue.RoutedSubject(genq.VariantB, "w1"), []byte("{}")); err != nil {
		t.Fatalf("the api could not queue a job on a worker's subject: %v", err)
	}
	if err := batch.NATS().Publish(natsqueue.RoutedSubject(genq.VariantB, "w1"), []byte("{}")); err != nil {
		t.Fatal(err)
	}

	// The batch role cannot pull the workers' jobs either.
	p, err := batch.NewPuller(ctx, genq.VariantB)
	if err == nil {
		if _, err := api.Publish(ctx, genq.Job{Envelope: genq.Envelope{ID: "job-2", Variant: genq.VariantB, Text: "another secret"}}); err != nil {
			t.Fatal(err)
		}
		if d, _ := p.Next(time.Second); d != nil {
			t.Fatalf("the batch role pulled a job: %+v", d)
		}
	}
	_ = batch.NATS().Flush()
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 0 {
		t.Fatalf("the batch role saw %v", seen)
	}
	if len(denied) == 0 {
		t.Fatal("no permission violation reported: the subscriptions were not refused")
	}
	if !slices.ContainsFunc(denied, func(e string) bool { return strings.Contains(e, `Publish to "genq.jobs.B"`) }) {
		t.Fatalf("the batch role published an interactive job; violations reported: %v", denied)
	}
	if !slices.ContainsFunc(denied, func(e string) bool { return strings.Contains(e, `Publish to "genq.jobs.B.w1"`) }) {
		t.Fatalf("the batch role published to a worker's subject; violations reported: %v", denied)
	}
}

// secretValue is the shape of a generated password: nats-server reads a
// value that starts with digits as a number ("69K2…" as 69K, then refuses
// the rest).
var secretValue = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]{31}$`)

// TestNATSSecretsScriptParses: the passwords scripts/nats-secrets.sh writes
// for compose have a letter first and come through nats-server's parsing of
// genq.conf intact, run after run.
func TestNATSSecretsScriptParses(t *testing.T) {
	conf := filepath.Join(root, "deploy", "nats", "genq.conf")
	for run := range 24 {
		env := filepath.Join(t.TempDir(), "nats.env")
		cmd := exec.Command(filepath.Join(root, "scripts", "nats-secrets.sh"))
		cmd.Env = append(os.Environ(), "GENQ_NATS_ENV="+env)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("nats-secrets.sh: %v\n%s", err, out)
		}
		b, err := os.ReadFile(env)
		if err != nil {
			t.Fatal(err)
		}
		passwords := map[string]string{}
		for _, line := range strings.Fields(string(b)) {
			k, v, _ := strings.Cut(line, "=")
			if !secretValue.MatchString(v) {
				t.Fatalf("run %d: %s is not 32 letters and digits with a letter first", run, k)
			}
			t.Setenv(k, v)
			role := strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(k, "GENQ_NATS_"), "_PASSWORD"))
			passwords["genq-"+role] = v
		}
		if len(passwords) != 3 {
			t.Fatalf("run %d wrote %q, want three passwords", run, b)
		}
		opts, err := server.ProcessConfigFile(conf)
		if err != nil {
			t.Fatalf("run %d: genq.conf with %q does not parse: %v", run, b, err)
		}
		for _, u := range opts.Users {
			if u.Password != passwords[u.Username] {
				t.Fatalf("run %d: user %s's password did not come through intact", run, u.Username)
			}
		}
	}
}
