package dispatch

import "errors"

// ErrAborted is returned (possibly wrapped) by Handle.Await once the Handle was
// aborted (Handle.Abort, Dispatcher.AbortAll, Dispatcher.Close) or closed
// (Handle.Close). When Dispatcher.Close aborted it, errors.Is(err,
// Config.ErrClosed) holds too.
var ErrAborted = errors.New("connactor: handle aborted")

// ErrHandlerPanicked is returned (wrapped with the panic's value) by
// Handle.Await when the Handle's notification handler panicked: the panic is
// contained, logged, and becomes a fatal problem for that Handle only.
var ErrHandlerPanicked = errors.New("connactor: notification handler panicked")

// errHandleClosed is what Await returns after Handle.Close.
var errHandleClosed error = &abortError{msg: "connactor: handle closed"}

// errHandleDone is the cause of a Handle's context once the Handle is over.
var errHandleDone = errors.New("connactor: handle done")

// abortError is an error that errors.Is ErrAborted (and also, when set).
type abortError struct {
	msg  string
	also error
}

func (e *abortError) Error() string { return e.msg }

func (e *abortError) Unwrap() []error {
	if e.also != nil {
		return []error{ErrAborted, e.also}
	}
	return []error{ErrAborted}
}
