package embed

import "fmt"

// oneNodeID gives the node one id, the runtime's: the Raft member's, the
// fleet node's and the API's are set to it when empty, and refused when
// they name another.
func oneNodeID(cfg *Config) error {
	id := cfg.Runtime.Config().NodeID
	check := func(field string, v *string) error {
		switch *v {
		case "":
			*v = id
		case id:
		default:
			return fmt.Errorf("StartNode: %s is %q but the runtime's node id is %q (carmy.WithNodeID): "+
				"a node has one id, or its records name a node the cluster does not know (cancels never reach the runner, "+
				"and its calls are never marked interrupted when it dies); give the id to carmy.WithNodeID and leave %s empty",
				field, *v, id, field)
		}
		return nil
	}
	if cfg.Raft != nil {
		raft := *cfg.Raft // the caller's config is not changed
		if err := check("Raft.NodeID", &raft.NodeID); err != nil {
			return err
		}
		cfg.Raft = &raft
	}
	if cfg.Postgres != nil {
		pg := *cfg.Postgres
		if err := check("Postgres.Fleet.NodeID", &pg.Fleet.NodeID); err != nil {
			return err
		}
		cfg.Postgres = &pg
	}
	return check("API.NodeID", &cfg.API.NodeID)
}
