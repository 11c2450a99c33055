// Package dockertest runs carmy nodes as containers on a private Docker
// network, for tests of faults that need separate hosts: kill and restart a
// node, pause it, cut it off the network and reconnect it (DESIGN.md, test
// tier (e)). It is the layer a fault-injection harness builds on.
//
// Everything goes through the docker CLI (os/exec), never the Docker API
// module, and every error carries the command and its output. Tests that use
// the package are off by default: they call Enabled and skip unless
// CARMY_DOCKER_TESTS=1, and Available says whether a daemon answers.
//
// The image is built once per test process by BuildImage, with the same
// recipe as scripts/image (it runs the script): a static carmy in an image
// FROM scratch (deploy/docker/Dockerfile), tagged carmy:dev or $CARMY_IMAGE.
// No registry is needed.
//
// NewNetwork creates a user-defined bridge network named after a fresh run
// id, "carmy-<label>-<random>" ($CARMY_NAME_PREFIX replaces "carmy-"). Every
// container, volume and the network itself carry the labels
// carmy.test.run=<run id>, carmy.test=dockertest and
// carmy.test.process=<host>/<pid>; when the test ends, even when it fails,
// its cleanup removes everything labelled with its run id (after logging
// each container's output if the test failed). A test process that gets
// SIGINT or SIGTERM removes what it made (tmpfs data dirs on the host
// included) before it exits, and so does one 15 s before its -timeout
// (which no cleanup survives). A process killed
// outright leaves its objects to the next test process: the first network
// (or Compose project, ProjectName) of a process sweeps away what dead test
// processes of this host left (SweepLeftovers), saying so on standard
// error; a run going on in another process keeps everything. By hand:
//
//	docker rm -f $(docker ps -aq --filter label=carmy.test=dockertest)
//	docker network rm $(docker network ls -q --filter label=carmy.test=dockertest)
//	docker volume rm $(docker volume ls -q --filter label=carmy.test=dockertest)
//
// Network.Start runs one node: container <run id>-<name> with host name and
// network alias <name>, its own volume on /data, and
//
//	serve --node-id <name> --data-dir /data --http-addr <name>:8080
//	  --raft-addr <name>:8300 --gossip-addr <name>:8301 --cluster-key <key> args…
//
// so the node binds its container's IP (carmy resolves the host names) and
// the others reach it by name. The HTTP port is published on 127.0.0.1 at a
// port Docker picks; Container.URL is where tests on the host call it. The
// port changes when the container restarts or reconnects, so read URL after
// each fault.
//
// Tests that run by default when Docker is there (the robustness harness,
// the Compose test of deploy/docker) gate on NeedEngine or NeedCompose
// instead of Require: they skip loudly without Docker and fail without it
// when CARMY_REQUIRE_DOCKER=1 or $CI is set. Their skips, like every skip
// of a Docker test, print a line to standard error, so that they show
// without -v. ComposeCommand finds Docker Compose (the v2 plugin or
// docker-compose).
//
// Network.StartService runs a container of another image on the network,
// such as the database of a fleet on PostgreSQL (BuildPostgresImage), with
// a readiness check of its own instead of GET /healthz; Container.HostAddr
// is where the host reaches its published port. It carries the run's
// labels and goes with the run.
//
// Container's fault methods (Kill, Stop, Start, Pause, Unpause, Disconnect,
// Connect) return errors instead of failing the test, so that a harness may
// call them from its own goroutines; they are safe for concurrent use.
//
// It is a test harness, not a supported API: only tests (_test.go files)
// import it, and it changes with them.
package dockertest
