package store

import "errors"

// Detailed is an error whose text is fit for whoever made the request (a
// tenant: it reaches an answer's message) and whose Detail says more, for
// the node's log only: what a backend answered, which may name its
// address, its user or its database. A store wraps the failures of its
// backend so; the API logs DetailOf of the error it answers.
type Detailed interface {
	error
	Detail() string
}

// DetailOf returns the Detail of the first Detailed error in err's chain,
// or "" when there is none.
func DetailOf(err error) string {
	var d Detailed
	if errors.As(err, &d) {
		return d.Detail()
	}
	return ""
}
