package deploy_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigsyaml "sigs.k8s.io/yaml"
)

const k8sDir = "deploy/kubernetes"

// manifest is one decoded document of a manifest file.
type manifest struct {
	File string
	Obj  any // *appsv1.StatefulSet, *corev1.Service, …
}

// newObject returns an empty object of the type apiVersion and kind name.
func newObject(apiVersion, kind string) (any, error) {
	switch apiVersion + " " + kind {
	case "apps/v1 StatefulSet":
		return &appsv1.StatefulSet{}, nil
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}, nil
	case "v1 Service":
		return &corev1.Service{}, nil
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}, nil
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, nil
	case "networking.k8s.io/v1 NetworkPolicy":
		return &networkingv1.NetworkPolicy{}, nil
	}
	return nil, fmt.Errorf("no k8s.io/api type known for apiVersion %q kind %q (add it to newObject)", apiVersion, kind)
}

// decodeManifests reads every *.yaml and *.yml of deploy/kubernetes, splits
// the documents and decodes each strictly (unknown or duplicate fields
// fail) into its k8s.io/api type.
func decodeManifests(t *testing.T) []manifest {
	t.Helper()
	return decodeManifestsIn(t, k8sDir)
}

// decodeManifestsIn is decodeManifests for the directory rel of the
// repository (its subdirectories left out).
func decodeManifestsIn(t *testing.T, rel string) []manifest {
	t.Helper()
	dir := filepath.Join(root(t), filepath.FromSlash(rel))
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []manifest
	for _, e := range entries {
		if e.IsDir() || !(strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml")) {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		docs, err := splitDocuments(raw)
		if err != nil {
			t.Errorf("%s: %v", e.Name(), err)
			continue
		}
		if len(docs) == 0 {
			t.Errorf("%s: no document", e.Name())
		}
		for i, doc := range docs {
			var tm metav1.TypeMeta
			if err := sigsyaml.Unmarshal(doc, &tm); err != nil {
				t.Errorf("%s document %d: %v", e.Name(), i+1, err)
				continue
			}
			obj, err := newObject(tm.APIVersion, tm.Kind)
			if err != nil {
				t.Errorf("%s document %d: %v", e.Name(), i+1, err)
				continue
			}
			if err := sigsyaml.UnmarshalStrict(doc, obj); err != nil {
				t.Errorf("%s document %d (%s): strict decoding into %T: %v", e.Name(), i+1, tm.Kind, obj, err)
				continue
			}
			out = append(out, manifest{File: e.Name(), Obj: obj})
		}
	}
	return out
}

// splitDocuments splits a multi-document YAML stream, dropping documents
// that hold nothing but comments. Each document is re-encoded from its
// node, keys and scalars as written.
func splitDocuments(raw []byte) ([][]byte, error) {
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	var docs [][]byte
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(n.Content) == 0 {
			continue
		}
		b, err := yaml.Marshal(&n)
		if err != nil {
			return nil, err
		}
		docs = append(docs, b)
	}
}

func only[T any](t *testing.T, ms []manifest, name string) *T {
	t.Helper()
	var found *T
	for _, m := range ms {
		if o, ok := m.Obj.(*T); ok && objectName(o) == name {
			if found != nil {
				t.Fatalf("two %T named %s", o, name)
			}
			found = o
		}
	}
	if found == nil {
		var zero T
		t.Fatalf("no %T named %s in %s", &zero, name, k8sDir)
	}
	return found
}

func objectName(o any) string {
	if m, ok := o.(interface{ GetName() string }); ok {
		return m.GetName()
	}
	return ""
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// TestKubernetesManifests decodes the manifests strictly and checks that
// they hang together: the StatefulSet's command line (every flag known to
// carmy serve, every CARMY_* variable read by it or named by the config as
// a token's), stable names from the pod name and the headless Service,
// ports and probes against carmy's defaults, Services and the budget
// against the pods, mounts against the files the flags name, and the
// security context against the image.
func TestKubernetesManifests(t *testing.T) {
	ms := decodeManifests(t)
	if t.Failed() {
		t.FailNow()
	}
	for _, m := range ms {
		o := m.Obj.(metav1.Object)
		if o.GetLabels()["app.kubernetes.io/name"] != "carmy" {
			t.Errorf("%s: %T %s lacks the label app.kubernetes.io/name: carmy", m.File, m.Obj, o.GetName())
		}
		if o.GetNamespace() != "" {
			t.Errorf("%s: %s names namespace %q: leave it to kubectl -n", m.File, o.GetName(), o.GetNamespace())
		}
	}
	sts := only[appsv1.StatefulSet](t, ms, "carmy")
	headless := only[corev1.Service](t, ms, sts.Spec.ServiceName)
	client := only[corev1.Service](t, ms, "carmy")
	pdb := only[policyv1.PodDisruptionBudget](t, ms, "carmy")
	netpol := only[networkingv1.NetworkPolicy](t, ms, "carmy")

	spec := sts.Spec.Template.Spec
	podLabels := sts.Spec.Template.Labels
	if len(spec.Containers) != 1 {
		t.Fatalf("the pod has %d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	selects := func(what string, sel map[string]string) {
		t.Helper()
		if len(sel) == 0 {
			t.Errorf("%s selects nothing", what)
		}
		for k, v := range sel {
			if podLabels[k] != v {
				t.Errorf("%s selects %s=%s, which the pods do not carry (%v)", what, k, v, podLabels)
			}
		}
	}
	selects("the StatefulSet", sts.Spec.Selector.MatchLabels)
	selects("Service "+headless.Name, headless.Spec.Selector)
	selects("Service "+client.Name, client.Spec.Selector)
	selects("the PodDisruptionBudget", pdb.Spec.Selector.MatchLabels)
	selects("the NetworkPolicy", netpol.Spec.PodSelector.MatchLabels)

	// The command line.
	if len(c.Args) == 0 || c.Args[0] != "serve" || len(c.Command) != 0 {
		t.Fatalf("container command %q args %q: want the image's entrypoint with args serve …", c.Command, c.Args)
	}
	args := parseServeArgs(t, "statefulset.yaml args", c.Args[1:])
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		if _, dup := env[e.Name]; dup {
			t.Errorf("env %s is given twice", e.Name)
		}
		env[e.Name] = e
	}
	fieldRef := func(name, path string) {
		t.Helper()
		e, ok := env[name]
		if !ok || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != path {
			t.Errorf("env %s: %+v, want the downward API's %s", name, e, path)
		}
	}
	fieldRef("POD_NAME", "metadata.name")
	fieldRef("POD_NAMESPACE", "metadata.namespace")
	used := map[string]bool{}
	for _, a := range c.Args {
		for _, m := range varRef.FindAllStringSubmatch(a, -1) {
			used[m[1]] = true
			if _, ok := env[m[1]]; !ok {
				t.Errorf("args refer to $(%s), which env does not define (Kubernetes would pass it on as is)", m[1])
			}
		}
	}
	cfg := k8sConfig(t, ms, spec, c, args)
	tokenEnvs := cfg.tokenEnvs()
	for name, e := range env {
		switch {
		case strings.HasPrefix(name, "CARMY_"):
			if !serveEnv(name) && !slices.Contains(tokenEnvs, name) {
				t.Errorf("env %s: carmy serve reads no such variable, and the config names no token by it", name)
			}
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef == nil {
				t.Errorf("env %s comes from %+v; secrets come from a Secret", name, e.ValueFrom)
			}
		case !used[name]:
			t.Errorf("env %s is used by no arg", name)
		}
	}
	for _, name := range tokenEnvs {
		e, ok := env[name]
		if !ok || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Optional != nil && *e.ValueFrom.SecretKeyRef.Optional {
			t.Errorf("the config reads a token from $%s: want it from a (required) Secret key, got %+v", name, e)
		}
	}
	if e, ok := env["CARMY_GOSSIP_KEY"]; !ok || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
		if !strings.Contains(args.Values["gossip-key"], "$(") {
			t.Errorf("no gossip key from a Secret (CARMY_GOSSIP_KEY): gossip off loopback needs one")
		}
	}
	if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
		for _, m := range ms {
			if s, ok := m.Obj.(*corev1.Service); ok && strings.HasPrefix(strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))+"_", "CARMY_") {
				t.Errorf("Service %s would put CARMY_* service-link variables into the pods: set enableServiceLinks: false", s.Name)
			}
		}
	}

	// Stable identity: the pod's name, and its name under the headless
	// Service for every address.
	if got := args.Values["node-id"]; got != "$(POD_NAME)" {
		t.Errorf("--node-id=%s, want $(POD_NAME)", got)
	}
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("podManagementPolicy %q: want Parallel (after a full stop no pod is ready until a quorum is back)", sts.Spec.PodManagementPolicy)
	}
	if !headless.Spec.PublishNotReadyAddresses || headless.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service %s: clusterIP %q publishNotReadyAddresses %v, want a headless Service that publishes pods not ready (peers resolve each other while forming)",
			headless.Name, headless.Spec.ClusterIP, headless.Spec.PublishNotReadyAddresses)
	}
	stable := func(pod string) string {
		return pod + "." + headless.Name + ".$(POD_NAMESPACE).svc.$(CLUSTER_DOMAIN)"
	}
	ports := map[string]int{}
	for flag, portName := range map[string]string{"http-addr": "http", "raft-addr": "raft", "gossip-addr": "gossip"} {
		host, port, err := net.SplitHostPort(args.Values[flag])
		if err != nil {
			t.Errorf("--%s=%q: %v", flag, args.Values[flag], err)
			continue
		}
		if host != stable("$(POD_NAME)") {
			t.Errorf("--%s host %q, want the pod's stable name %q", flag, host, stable("$(POD_NAME)"))
		}
		n, _ := strconv.Atoi(port)
		if want := defaultPort(t, flag); n != want {
			t.Errorf("--%s port %d, carmy's default is %d", flag, n, want)
		}
		ports[portName] = n
	}
	ports["gossip-udp"] = ports["gossip"]
	httpPort := ports["http"]
	replicas := int32(1)
	if sts.Spec.Replicas != nil {
		replicas = *sts.Spec.Replicas
	}
	if replicas < 3 || replicas%2 == 0 {
		t.Errorf("replicas %d: want an odd number, 3 or more", replicas)
	}
	if args.Has("bootstrap") {
		t.Errorf("--bootstrap on every pod would found a cluster per pod")
	}
	if got := args.Values["bootstrap-node"]; got != sts.Name+"-0" {
		t.Errorf("--bootstrap-node=%q, want %s-0 (the first pod founds the cluster)", got, sts.Name)
	}
	var wantJoin []string
	for i := range replicas {
		wantJoin = append(wantJoin, net.JoinHostPort(stable(fmt.Sprintf("%s-%d", sts.Name, i)), strconv.Itoa(httpPort)))
	}
	if got := strings.Split(args.Values["join"], ","); !slices.Equal(got, wantJoin) {
		t.Errorf("--join=%q, want the first %d pods' HTTP addresses %q", args.Values["join"], replicas, wantJoin)
	}

	// Ports: the container's, the Services', the NetworkPolicy's.
	cports := map[string]corev1.ContainerPort{}
	for _, p := range c.Ports {
		cports[p.Name] = p
	}
	for name, want := range ports {
		p, ok := cports[name]
		proto := corev1.ProtocolTCP
		if name == "gossip-udp" {
			proto = corev1.ProtocolUDP
		}
		if !ok || int(p.ContainerPort) != want || p.Protocol != proto {
			t.Errorf("container port %s: %+v, want %d/%s", name, p, want, proto)
		}
	}
	if len(cports) != len(ports) {
		t.Errorf("container ports %v, want exactly %v", c.Ports, ports)
	}
	targets := func(s *corev1.Service, want []string) {
		t.Helper()
		var got []string
		for _, p := range s.Spec.Ports {
			cp, ok := cports[p.TargetPort.String()]
			if p.TargetPort.Type != intstr.String || !ok {
				t.Errorf("Service %s port %s targets %q, not a named container port", s.Name, p.Name, p.TargetPort.String())
				continue
			}
			if p.Protocol != cp.Protocol {
				t.Errorf("Service %s port %s is %s, its target %s", s.Name, p.Name, p.Protocol, cp.Protocol)
			}
			if s == headless && p.Port != cp.ContainerPort {
				t.Errorf("Service %s port %s: %d, the container's %d (peers dial the pod's name with carmy's ports)", s.Name, p.Name, p.Port, cp.ContainerPort)
			}
			got = append(got, p.TargetPort.String())
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("Service %s targets %v, want %v", s.Name, got, want)
		}
	}
	targets(headless, []string{"http", "raft", "gossip", "gossip-udp"})
	targets(client, []string{"http"})
	if client.Spec.Ports[0].Port != int32(httpPort) {
		t.Errorf("Service %s listens on %d; clients expect carmy's %d", client.Name, client.Spec.Ports[0].Port, httpPort)
	}
	open := map[string]bool{}
	for _, rule := range netpol.Spec.Ingress {
		for _, p := range rule.Ports {
			proto := corev1.ProtocolTCP
			if p.Protocol != nil {
				proto = *p.Protocol
			}
			key := fmt.Sprintf("%s/%s", p.Port.String(), proto)
			if len(rule.From) == 0 {
				open[key] = true
				continue
			}
			for _, f := range rule.From {
				if f.PodSelector == nil || f.NamespaceSelector != nil || f.IPBlock != nil {
					t.Errorf("NetworkPolicy: %s is open to %+v; peers are carmy pods of the namespace", key, f)
					continue
				}
				selects("the NetworkPolicy's peers", f.PodSelector.MatchLabels)
			}
			if _, seen := open[key]; !seen {
				open[key] = false
			}
		}
	}
	for name, p := range ports {
		proto := "TCP"
		if name == "gossip-udp" {
			proto = "UDP"
		}
		key := fmt.Sprintf("%d/%s", p, proto)
		isOpen, listed := open[key]
		switch {
		case !listed:
			t.Errorf("NetworkPolicy lets nothing reach %s (%s)", key, name)
		case name == "http" && !isOpen:
			t.Errorf("NetworkPolicy: the API port %s must be open to clients", key)
		case name != "http" && isOpen:
			t.Errorf("NetworkPolicy: %s (%s) is open to all; only carmy pods need it", key, name)
		}
	}

	// Probes: paths and port against carmy's, HTTPS when the API is.
	scheme := corev1.URISchemeHTTP
	if args.Has("tls-cert") {
		scheme = corev1.URISchemeHTTPS
	}
	probe := func(what string, p *corev1.Probe, path string) {
		t.Helper()
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s probe: want an HTTP GET of %s", what, path)
			return
		}
		g := p.HTTPGet
		if g.Path != path || g.Scheme != scheme || !(g.Port.String() == "http" || g.Port.IntValue() == httpPort) {
			t.Errorf("%s probe: GET %s://:%s%s, want %s://:http%s", what, g.Scheme, g.Port.String(), g.Path, scheme, path)
		}
	}
	probe("readiness", c.ReadinessProbe, readyPath)
	probe("liveness", c.LivenessProbe, livePath)
	if c.StartupProbe != nil {
		probe("startup", c.StartupProbe, livePath)
	}

	// Shutdown: preStop + carmy's budget within the grace period.
	var preStop int64
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if c.Lifecycle.PreStop.Sleep == nil {
			t.Errorf("preStop %+v: the image has no shell; use the sleep action", c.Lifecycle.PreStop)
		} else {
			preStop = c.Lifecycle.PreStop.Sleep.Seconds
		}
	} else {
		t.Errorf("no preStop: the endpoints would still send calls while the node stops")
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil || *g < preStop+int64(shutdownBudget.Seconds()) {
		t.Errorf("terminationGracePeriodSeconds %v < preStop %ds + %s (hand-off, 5 s drain, margin)", g, preStop, shutdownBudget)
	}

	// The budget keeps a quorum at this size and at five.
	for _, n := range []int{int(replicas), 5} {
		down, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, n, true)
		if pdb.Spec.MaxUnavailable == nil || err != nil {
			t.Errorf("PodDisruptionBudget: maxUnavailable %v (%v); want 1", pdb.Spec.MaxUnavailable, err)
			break
		}
		if n-down < n/2+1 {
			t.Errorf("PodDisruptionBudget lets %d of %d pods go: fewer than a quorum (%d) would stay", down, n, n/2+1)
		}
	}
	if pdb.Spec.MinAvailable != nil {
		t.Errorf("PodDisruptionBudget: minAvailable is set; maxUnavailable alone follows scaling")
	}

	// Security: non-root (the image's user), read-only root, no
	// privileges, no API token.
	psc, csc := spec.SecurityContext, c.SecurityContext
	switch {
	case psc == nil || csc == nil:
		t.Fatal("no pod or container securityContext")
	case psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot, psc.RunAsUser == nil || *psc.RunAsUser != imageUser,
		psc.RunAsGroup == nil || *psc.RunAsGroup != imageUser, psc.FSGroup == nil || *psc.FSGroup != imageUser:
		t.Errorf("pod securityContext %+v: want runAsNonRoot, user, group and fsGroup %d (the image's)", psc, imageUser)
	case psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("pod seccompProfile %+v: want RuntimeDefault", psc.SeccompProfile)
	}
	if csc != nil && (csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem ||
		csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation ||
		csc.Capabilities == nil || !slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(csc.Capabilities.Add) > 0 ||
		csc.Privileged != nil && *csc.Privileged) {
		t.Errorf("container securityContext %+v: want a read-only root, no privilege escalation, every capability dropped", csc)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("automountServiceAccountToken: want false (carmy does not use the Kubernetes API)")
	}

	// Storage: the data dir is the claim template's mount.
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	dataMount, ok := mounts[args.Values["data-dir"]]
	if !ok || len(sts.Spec.VolumeClaimTemplates) != 1 || sts.Spec.VolumeClaimTemplates[0].Name != dataMount.Name {
		t.Errorf("--data-dir=%s: want it to be the mount of the volume claim template (mounts %v)", args.Values["data-dir"], c.VolumeMounts)
	}
	if p := sts.Spec.PersistentVolumeClaimRetentionPolicy; p == nil || p.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType ||
		p.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
		t.Errorf("persistentVolumeClaimRetentionPolicy %+v: want Retain (a node's data outlives its pod)", p)
	}
	if mounts["/tmp"].Name == "" {
		t.Errorf("no volume on /tmp: the root file system is read-only")
	}

	// TLS: every file the flags name is a key of the mounted Secret.
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	for _, flag := range []string{"node-tls-ca", "node-tls-cert", "node-tls-key", "tls-cert", "tls-key"} {
		path, ok := args.Values[flag]
		if !ok {
			t.Errorf("--%s is not given: the nodes talk off loopback, so node TLS (and API TLS) belong on", flag)
			continue
		}
		v, key := mountedKey(t, mounts, volumes, path)
		if v.Secret == nil {
			t.Errorf("--%s=%s is not in a Secret volume (%+v)", flag, path, v)
		} else if v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o007 != 0 {
			t.Errorf("Secret volume %s: defaultMode %v lets others read %s", v.Name, v.Secret.DefaultMode, key)
		}
	}
}

// mountedKey returns the volume mounted over path's directory and the key
// path names in it.
func mountedKey(t *testing.T, mounts map[string]corev1.VolumeMount, volumes map[string]corev1.Volume, path string) (corev1.Volume, string) {
	t.Helper()
	dir, key := filepath.Dir(path), filepath.Base(path)
	m, ok := mounts[dir]
	if !ok {
		t.Errorf("%s: no volume is mounted on %s", path, dir)
		return corev1.Volume{}, key
	}
	if !m.ReadOnly {
		t.Errorf("the mount of %s is writable", dir)
	}
	v, ok := volumes[m.Name]
	if !ok {
		t.Errorf("mount %s: no volume %s", dir, m.Name)
	}
	return v, key
}

// k8sConfig returns the config file --config names: a key of the ConfigMap
// mounted over its directory, decoded, its tokens' variables set from the
// pod's env.
func k8sConfig(t *testing.T, ms []manifest, spec corev1.PodSpec, c corev1.Container, args parsedArgs) fileConfig {
	t.Helper()
	path, ok := args.Values["config"]
	if !ok {
		t.Fatal("no --config: tokens come from the config file, and a node off loopback needs them")
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	v, key := mountedKey(t, mounts, volumes, path)
	if v.ConfigMap == nil {
		t.Fatalf("--config=%s is not in a ConfigMap volume", path)
	}
	cm := only[corev1.ConfigMap](t, ms, v.ConfigMap.Name)
	text, ok := cm.Data[key]
	if !ok {
		t.Fatalf("ConfigMap %s has no key %s (--config=%s)", cm.Name, key, path)
	}
	return decodeConfig(t, "ConfigMap "+cm.Name+" "+key, []byte(text))
}
