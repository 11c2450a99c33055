// Package docker holds the container image's recipe (Dockerfile, built by
// scripts/image), a 3-node Compose cluster (compose.yaml, carmy.yaml, and
// setup, which makes its secrets) and the test that runs that cluster:
// TestCompose brings it up with Docker Compose under a project name of its
// own, calls every node, replays calls through other nodes, restarts a
// node, scales the cluster to five nodes and back as README.md here says,
// and takes everything down again (containers, network, volumes), even when
// it fails.
//
// TestCompose is part of `go test ./...`: without a Docker engine and
// Compose it is skipped, loudly, and with CARMY_REQUIRE_DOCKER=1 (or $CI
// set) it fails instead. CARMY_COMPOSE_TEST=off skips it. It builds the
// image carmy:dev ($CARMY_IMAGE) as scripts/image does.
//
// The directory test/ is the robustness harness's image (scripts/image
// --test), not part of this package.
package docker
