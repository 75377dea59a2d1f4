// Package errs holds the error sentinels that the connection packages (conn,
// conn/h2) and the front door share, and connactor's one timeout error type.
// Users see them through package client.
package errs

import "errors"

// ErrNotSent marks failures that happened before any byte of the request
// reached the connection: replaying the request is safe whatever its method.
var ErrNotSent = errors.New("request not sent")

// ErrOutcomeUnknown marks failures after the request (or part of it) was
// written and before a complete response head was read: the server may have
// acted on it.
var ErrOutcomeUnknown = errors.New("request sent, outcome unknown")

// ErrResponseHeaderTooLarge is returned when a response head exceeds the limit.
var ErrResponseHeaderTooLarge = errors.New("response header too large")

// ErrResponseHeaderTimeout is returned when a response head did not arrive in
// time. It is a net.Error whose Timeout() is true.
var ErrResponseHeaderTimeout = Timeout("timeout awaiting response headers", "response_header_timeout")

// Timeout returns a new timeout sentinel: a net.Error whose Timeout() is true,
// with msg as its text and kind as its OpenTelemetry error.type.
func Timeout(msg, kind string) error { return &timeoutError{msg: msg, kind: kind} }

type timeoutError struct{ msg, kind string }

func (e *timeoutError) Error() string     { return e.msg }
func (e *timeoutError) Timeout() bool     { return true }
func (e *timeoutError) Temporary() bool   { return true }
func (e *timeoutError) ErrorType() string { return e.kind }
