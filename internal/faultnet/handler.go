package faultnet

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// KeyHeader carries the cluster key on every control request.
const KeyHeader = "Carmy-Cluster-Key"

// maxRulesBody bounds a PUT body.
const maxRulesBody = 1 << 20

// errorBody is the JSON body of every error answer.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// Handler serves the Filter's rules to a fault-injection harness:
//
//	GET  answers 200 with the rules in force (Rules as JSON);
//	PUT  takes a Rules JSON body, sets it (Set) and answers 200 with the
//	     rules now in force. A body that is not exactly one Rules object
//	     (unknown fields, trailing data, null, too large) or an entry that
//	     is neither an IP nor a resolvable name answers 400.
//
// Every request must carry KeyHeader equal to key: without it the answer
// is 401, with another value 403. With an empty key every request is
// refused (403). Other methods answer 405. Errors are JSON
// {"error": code, "message": text}.
func (f *Filter) Handler(key string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code, status, msg := checkKey(r, key); status != 0 {
			writeError(w, status, code, msg)
			return
		}
		switch r.Method {
		case http.MethodGet:
			writeJSON(w, http.StatusOK, f.Rules())
		case http.MethodPut:
			f.servePut(w, r)
		default:
			w.Header().Set("Allow", "GET, PUT")
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed: use GET or PUT")
		}
	})
}

// checkKey returns a non-zero status when the request lacks the key.
func checkKey(r *http.Request, key string) (code string, status int, msg string) {
	got := r.Header.Values(KeyHeader)
	switch {
	case key == "":
		return "forbidden", http.StatusForbidden, "the fault layer needs a cluster key (--cluster-key)"
	case len(got) == 0:
		return "unauthorized", http.StatusUnauthorized, "missing " + KeyHeader
	case len(got) > 1 || subtle.ConstantTimeCompare([]byte(got[0]), []byte(key)) != 1:
		return "forbidden", http.StatusForbidden, "wrong cluster key"
	}
	return "", 0, ""
}

func (f *Filter) servePut(w http.ResponseWriter, r *http.Request) {
	rules, err := decodeRules(http.MaxBytesReader(w, r.Body, maxRulesBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	if err := f.SetContext(r.Context(), rules); err != nil {
		writeError(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, f.Rules())
}

// decodeRules reads exactly one Rules object, refusing unknown fields.
func decodeRules(body io.Reader) (Rules, error) {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	var rules *Rules
	if err := dec.Decode(&rules); err != nil {
		if errors.Is(err, io.EOF) {
			return Rules{}, errors.New("faultnet: empty body: want a JSON object with drop_in and drop_out")
		}
		return Rules{}, fmt.Errorf("faultnet: body: %w", err)
	}
	if rules == nil {
		return Rules{}, errors.New("faultnet: body is null: want a JSON object with drop_in and drop_out")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Rules{}, errors.New("faultnet: body: unexpected data after the JSON object")
	}
	return *rules, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the caller is gone: nothing to do
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorBody{Error: code, Message: msg})
}
