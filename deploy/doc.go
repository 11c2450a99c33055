// Package deploy holds Carmy's deployment files and the tests that keep
// them true to the binary:
//
//	systemd/      carmy.service (hardened), carmy.env (every CARMY_* variable
//	              of carmy serve), carmy.yaml, carmy.sysusers
//	docker/       the image's Dockerfile, a 3-node compose.yaml, its setup
//	              script and config (package docker: the test that runs it)
//	kubernetes/   a StatefulSet, its Services, a PodDisruptionBudget, a
//	              NetworkPolicy and the config's ConfigMap
//
// The tests here need no Docker and take seconds: they build carmy (or use
// $CARMY_DEPLOY_BIN), read the flags and variables of `carmy help serve` (and
// of carmy health, cluster and tls), decode every Kubernetes manifest
// strictly into its k8s.io/api type, parse compose.yaml, the unit and the
// environment file, and check that every flag and CARMY_* variable they use
// exists, that carmy.env documents every variable carmy serve reads, and
// that ports, probe paths, shutdown budgets and mounted files agree with
// carmy's defaults and with each other. Each shipped config file is loaded
// by a real node on loopback, which must answer its probes and list its
// tools. CARMY_DEPLOY_BIN runs the checks against another build (say, one with a
// flag renamed through go build -overlay: the tests must fail).
package deploy
