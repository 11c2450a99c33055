package tracerecv

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"

	"github.com/carmyhq/carmy/internal/tracing/otlpread"
)

// DefaultMaxBody is the largest export Handler takes by default (its
// decompressed size): 16 MiB, four times the batches OpenTelemetry's SDKs
// send by default.
const DefaultMaxBody = 16 << 20

// Handler is the OTLP/HTTP endpoint POST /v1/traces, keeping what it
// receives in a Buffer.
//
// It answers an export of Content-Type application/x-protobuf (or
// application/protobuf) that otlpread.Decode reads, or application/json
// that otlpread.DecodeJSON reads, gzip-compressed or not, with 200 and an
// empty ExportTraceServiceResponse in the same encoding (a partial
// success when the buffer dropped spans); a body that is not one with 400
// and a text/plain message saying what is wrong; a body (or its
// decompressed content) larger than MaxBody with 413; another content
// type or encoding with 415; another method with 405.
type Handler struct {
	Buffer *Buffer
	// MaxBody bounds an export's size, decompressed (DefaultMaxBody when
	// 0).
	MaxBody int64
	// Log, when not nil, is told of each export taken (at debug) and
	// refused (at warn).
	Log *slog.Logger
}

// OTLP/HTTP's media types: binary protobuf, and JSON.
const (
	contentTypeProtobuf = "application/x-protobuf"
	contentTypeJSON     = "application/json"
)

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.refuse(w, r, http.StatusMethodNotAllowed, "POST an OTLP trace export here")
		return
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	decode, isJSON := otlpread.Decode, mt == contentTypeJSON
	if isJSON {
		decode = otlpread.DecodeJSON
	}
	if err != nil || (mt != contentTypeProtobuf && mt != "application/protobuf" && !isJSON) {
		h.refuse(w, r, http.StatusUnsupportedMediaType, "Content-Type must be "+contentTypeProtobuf+" or "+contentTypeJSON+" (OTLP/HTTP)")
		return
	}
	max := h.MaxBody
	if max <= 0 {
		max = DefaultMaxBody
	}
	var body io.Reader = http.MaxBytesReader(w, r.Body, max)
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			h.readError(w, r, max, fmt.Errorf("gzip: %w", err))
			return
		}
		defer zr.Close()
		body = io.LimitReader(zr, max+1)
	default:
		h.refuse(w, r, http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Encoding %q: only gzip is taken", enc))
		return
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		h.readError(w, r, max, err)
		return
	}
	if int64(len(raw)) > max {
		h.refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("the export is larger than %d bytes decompressed", max))
		return
	}
	req, err := decode(raw)
	if err != nil {
		h.refuse(w, r, http.StatusBadRequest, err.Error())
		return
	}
	dropped := h.Buffer.Add(req)
	if h.Log != nil {
		h.Log.Debug("export received", slog.Int("spans", req.SpanCount()), slog.Int("dropped", dropped))
	}
	var message string
	if dropped > 0 {
		message = "the receiver's store is full"
	}
	if isJSON {
		w.Header().Set("Content-Type", contentTypeJSON)
		w.WriteHeader(http.StatusOK)
		w.Write(otlpread.EncodeResponseJSON(int64(dropped), message))
		return
	}
	w.Header().Set("Content-Type", contentTypeProtobuf)
	w.WriteHeader(http.StatusOK)
	w.Write(otlpread.EncodeResponse(int64(dropped), message))
}

// readError answers an error reading the body: 413 past the limit, else
// 400.
func (h *Handler) readError(w http.ResponseWriter, r *http.Request, max int64, err error) {
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		h.refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("the export is larger than %d bytes", max))
		return
	}
	h.refuse(w, r, http.StatusBadRequest, "reading the export: "+err.Error())
}

// refuse answers status with message as text/plain, and logs it.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, status int, message string) {
	if h.Log != nil {
		h.Log.Warn("export refused", slog.Int("status", status), slog.String("from", r.RemoteAddr), slog.String("error", message))
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	io.WriteString(w, message+"\n")
}
