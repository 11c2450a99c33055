// Package storetest is the conformance suite every store.Store passes.
//
// A back end runs it with one call from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, capacity int) store.Store {
//			return mybackend.New(t, capacity)
//		})
//	}
//
// The factory returns a new, empty store bounded to capacity records; the
// suite runs its cases as parallel subtests, each on its own store.
package storetest
