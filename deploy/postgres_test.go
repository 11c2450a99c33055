package deploy_test

import (
	"maps"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestComposePostgres checks compose.postgres.yaml: a database service and
// nodes n1-n3 that run `carmy serve` with flags and variables carmy knows,
// no Raft and no gossip, --store (CARMY_STORE) naming the database service
// with no password in it, the password from a file mounted read-only and
// the database's own, and every file a variable names mounted.
func TestComposePostgres(t *testing.T) {
	var f composeFile
	if err := yaml.Unmarshal(read(t, "deploy/docker/compose.postgres.yaml"), &f); err != nil {
		t.Fatalf("compose.postgres.yaml: %v", err)
	}
	names := slices.Sorted(maps.Keys(f.Services))
	if want := []string{"db", "n1", "n2", "n3"}; !slices.Equal(names, want) {
		t.Fatalf("services %v, want %v", names, want)
	}
	db := f.Services["db"]
	dbPassword := db.Environment["POSTGRES_PASSWORD_FILE"]
	if dbPassword == "" || db.Environment["POSTGRES_USER"] == "" || db.Environment["POSTGRES_DB"] == "" {
		t.Fatalf("db: environment %v, want POSTGRES_USER, POSTGRES_DB and POSTGRES_PASSWORD_FILE", db.Environment)
	}
	dbMounts := mountsOf(t, "db", db.Volumes)
	if _, ok := f.Volumes[dbMounts["/var/lib/postgresql/data"]]; !ok {
		t.Errorf("db: the data is not on a declared volume: %v", dbMounts)
	}
	for _, name := range names[1:] {
		s := f.Services[name]
		where := "compose.postgres.yaml " + name
		if s.Image != "${CARMY_IMAGE:-carmy:dev}" || s.PullPolicy != "never" || !s.ReadOnly || s.Hostname != name {
			t.Errorf("%s: image %q pull_policy %q read_only %v hostname %q", where, s.Image, s.PullPolicy, s.ReadOnly, s.Hostname)
		}
		if len(s.Command) == 0 || s.Command[0] != "serve" {
			t.Fatalf("%s: command %q, want serve …", where, s.Command)
		}
		args := parseServeArgs(t, where, s.Command[1:])
		if args.Values["node-id"] != name {
			t.Errorf("%s: --node-id=%q, want the service's name", where, args.Values["node-id"])
		}
		for _, flag := range []string{"bootstrap", "join", "raft-addr", "gossip-addr", "data-dir", "dev", "insecure"} {
			if args.Has(flag) {
				t.Errorf("%s: --%s has no place on a node of a fleet", where, flag)
			}
		}
		for k := range s.Environment {
			if !serveEnv(k) {
				t.Errorf("%s: variable %s: carmy serve reads no such variable", where, k)
			}
		}
		store := expand(s.Environment["CARMY_STORE"])
		u, err := url.Parse(store)
		switch {
		case err != nil || u.Scheme != "postgres":
			t.Errorf("%s: CARMY_STORE %q is not a postgres:// URL", where, store)
		case u.Hostname() != "db" || u.Port() != "5432":
			t.Errorf("%s: CARMY_STORE %q does not name the db service on 5432", where, store)
		case u.User.Username() != db.Environment["POSTGRES_USER"] || strings.TrimPrefix(u.Path, "/") != db.Environment["POSTGRES_DB"]:
			t.Errorf("%s: CARMY_STORE %q: user and database are not db's %s/%s", where, store, db.Environment["POSTGRES_USER"], db.Environment["POSTGRES_DB"])
		}
		if _, has := u.User.Password(); has || u.Query().Has("password") {
			t.Errorf("%s: CARMY_STORE carries the password", where)
		}
		mounts := mountsOf(t, where, s.Volumes)
		pw := s.Environment["CARMY_STORE_PASSWORD_FILE"]
		if pw == "" || mounts[pw] == "" || mounts[pw] != dbMounts[dbPassword] {
			t.Errorf("%s: CARMY_STORE_PASSWORD_FILE %q is not mounted from the file db reads its password from (%s)", where, pw, dbMounts[dbPassword])
		}
		for _, k := range []string{"CARMY_CONFIG", "CARMY_TLS_CERT", "CARMY_TLS_KEY"} {
			if mounts[s.Environment[k]] == "" {
				t.Errorf("%s: %s=%s is not mounted", where, k, s.Environment[k])
			}
		}
		if s.Healthcheck == nil || !slices.Contains(s.Healthcheck.Test, "https://"+name+":8080") {
			t.Errorf("%s: the healthcheck does not ask the node's own address", where)
		}
	}
}

// mountsOf returns the bind mounts and volumes of a service, target to
// source, failing t for one that is writable but for PostgreSQL's data.
func mountsOf(t *testing.T, where string, volumes []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, v := range volumes {
		parts := strings.Split(expand(v), ":")
		if len(parts) < 2 {
			t.Errorf("%s: volume %q", where, v)
			continue
		}
		out[parts[1]] = parts[0]
		if (len(parts) < 3 || parts[2] != "ro") && parts[1] != "/var/lib/postgresql/data" {
			t.Errorf("%s: %s is mounted writable", where, parts[1])
		}
	}
	return out
}

// TestKubernetesPostgres decodes deploy/kubernetes/postgres strictly and
// checks the fleet's Deployment: carmy serve with flags carmy knows, no
// Raft and no gossip, --store and its password from the Secret the
// database reads, the password file mounted, the Service in front of
// the Deployment's pods and the database's Service named in the URL of
// the README.
func TestKubernetesPostgres(t *testing.T) {
	ms := decodeManifestsIn(t, filepath.Join(k8sDir, "postgres"))
	var (
		fleet    *appsv1.Deployment
		db       *appsv1.StatefulSet
		services = map[string]*corev1.Service{}
	)
	for _, m := range ms {
		switch o := m.Obj.(type) {
		case *appsv1.Deployment:
			fleet = o
		case *appsv1.StatefulSet:
			db = o
		case *corev1.Service:
			services[o.Name] = o
		}
	}
	if fleet == nil || db == nil {
		t.Fatal("want a Deployment (the fleet) and a StatefulSet (the database)")
	}
	c := fleet.Spec.Template.Spec.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Fatalf("the fleet's args %q, want serve …", c.Args)
	}
	args := parseServeArgs(t, "deployment.yaml", c.Args[1:])
	for _, flag := range []string{"bootstrap", "bootstrap-node", "join", "raft-addr", "gossip-addr", "data-dir", "dev", "insecure"} {
		if args.Has(flag) {
			t.Errorf("deployment.yaml: --%s has no place on a node of a fleet", flag)
		}
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if args.Values["store"] != "$(CARMY_POSTGRES_URL)" || env["CARMY_POSTGRES_URL"].ValueFrom == nil ||
		env["CARMY_POSTGRES_URL"].ValueFrom.SecretKeyRef == nil {
		t.Errorf("deployment.yaml: --store=%q, want $(CARMY_POSTGRES_URL) from a Secret", args.Values["store"])
	}
	secret := env["CARMY_POSTGRES_URL"].ValueFrom.SecretKeyRef.Name
	if args.Values["node-id"] != "$(POD_NAME)" {
		t.Errorf("deployment.yaml: --node-id=%q, want $(POD_NAME)", args.Values["node-id"])
	}
	pwFile := args.Values["store-password-file"]
	mounted := false
	for _, vm := range c.VolumeMounts {
		if !strings.HasPrefix(pwFile, vm.MountPath+"/") {
			continue
		}
		for _, v := range fleet.Spec.Template.Spec.Volumes {
			if v.Name == vm.Name && v.Secret != nil && v.Secret.SecretName == secret && len(v.Secret.Items) == 1 &&
				vm.MountPath+"/"+v.Secret.Items[0].Path == pwFile {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Errorf("deployment.yaml: --store-password-file=%q is not a key of Secret %s mounted there", pwFile, secret)
	}
	dbEnv := map[string]corev1.EnvVar{}
	for _, e := range db.Spec.Template.Spec.Containers[0].Env {
		dbEnv[e.Name] = e
	}
	found := false
	for _, v := range db.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == secret {
			found = true
		}
	}
	if !found || dbEnv["POSTGRES_PASSWORD_FILE"].Value == "" {
		t.Errorf("postgres.yaml: the database does not read its password from Secret %s", secret)
	}
	if s := services[fleet.Name]; s == nil || !maps.Equal(s.Spec.Selector, fleet.Spec.Selector.MatchLabels) {
		t.Errorf("no Service %s selecting the fleet's pods", fleet.Name)
	}
	if s := services[db.Name]; s == nil || !maps.Equal(s.Spec.Selector, db.Spec.Selector.MatchLabels) {
		t.Errorf("no Service %s selecting the database's pod", db.Name)
	}
	readme := string(read(t, k8sDir+"/postgres/README.md"))
	if want := "@" + db.Name + ":5432/" + dbEnv["POSTGRES_DB"].Value; !strings.Contains(readme, want) {
		t.Errorf("postgres/README.md: the URL of Secret %s does not name the database's Service (%s)", secret, want)
	}
}
