// Command upstream is a tiny HTTP tool server for trying Carmy's HTTP tools:
// the config of examples/local-cluster points its place_order tool here.
//
//	go run ./examples/upstream [-addr 127.0.0.1:7070]
//
// POST /orders takes {"sku": "…"} and answers {"order_id": n, "sku": …,
// "idempotency_key": …, "fencing_token": …}. It shows what an upstream can
// do with the headers Carmy sends:
//
//   - Idempotency-Key is the same for every execution of one identity, so
//     an order already placed under a key is answered again, not placed
//     twice (even after an operator released the identity and it ran again).
//   - Carmy-Fencing-Token grows with every reservation, so a request whose
//     token is below the highest one seen for its key comes from an older,
//     presumed-dead runner: it is refused with 409.
//
// GET /orders lists the orders placed. GET /orders/by-key/{key} answers
// the order placed under an Idempotency-Key, or 404 when none was: the
// reconcile probe of the local cluster's config asks it whether an
// interrupted call's order was placed (docs/config.md#reconcile-probes). State is in memory: a
// restart forgets it. It is an example, not a server to deploy.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net/http"
	"strconv"
	"sync"
)

type order struct {
	OrderID        int    `json:"order_id"`
	SKU            string `json:"sku"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	FencingToken   uint64 `json:"fencing_token,omitempty"`
}

type shop struct {
	mu     sync.Mutex
	orders []order
	byKey  map[string]int    // Idempotency-Key → index in orders
	fence  map[string]uint64 // Idempotency-Key → highest fencing token seen
}

func main() {
	addr := flag.String("addr", "127.0.0.1:7070", "host:port to listen on")
	flag.Parse()
	s := &shop{byKey: map[string]int{}, fence: map[string]uint64{}}
	http.HandleFunc("POST /orders", s.place)
	http.HandleFunc("GET /orders", s.list)
	http.HandleFunc("GET /orders/by-key/{key}", s.byKeyLookup)
	log.Printf("upstream: listening on http://%s (POST /orders, GET /orders, GET /orders/by-key/{key})", *addr)
	log.Fatal(http.ListenAndServe(*addr, nil))
}

func (s *shop) place(w http.ResponseWriter, r *http.Request) {
	var in struct {
		SKU string `json:"sku"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.SKU == "" {
		http.Error(w, `{"error":"want {\"sku\": \"…\"}"}`, http.StatusBadRequest)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	token, _ := strconv.ParseUint(r.Header.Get("Carmy-Fencing-Token"), 10, 64)
	log.Printf("upstream: POST /orders sku=%s Idempotency-Key=%s Carmy-Execution-Id=%s Carmy-Fencing-Token=%d",
		in.SKU, key, r.Header.Get("Carmy-Execution-Id"), token)

	s.mu.Lock()
	defer s.mu.Unlock()
	if key != "" {
		if token != 0 && token < s.fence[key] {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"error":"stale fencing token"}`))
			return
		}
		if token > s.fence[key] {
			s.fence[key] = token
		}
		if i, ok := s.byKey[key]; ok {
			writeJSON(w, s.orders[i])
			return
		}
	}
	o := order{OrderID: len(s.orders) + 1, SKU: in.SKU, IdempotencyKey: key, FencingToken: token}
	s.orders = append(s.orders, o)
	if key != "" {
		s.byKey[key] = len(s.orders) - 1
	}
	writeJSON(w, o)
}

// byKeyLookup answers the order placed under the key, or 404.
func (s *shop) byKeyLookup(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.byKey[r.PathValue("key")]
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":"no order under that key"}`))
		return
	}
	writeJSON(w, s.orders[i])
}

func (s *shop) list(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	writeJSON(w, map[string]any{"orders": append([]order{}, s.orders...)})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
