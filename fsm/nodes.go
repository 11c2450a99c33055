package fsm

// RunningNodes returns the distinct node ids of the running records,
// sorted (store.RunningNodeLister). It visits every record under the read
// lock, by pointer.
func (f *FSM) RunningNodes() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.p.st.RunningNodes()
}
