package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/internal/mailbox"
)

// InlineMailbox returns a mailbox producer for actors whose Receive never blocks
// (route actors): a message sent to an idle actor is processed at once on the
// sender's goroutine, up to budget messages, and whatever is left is handed to
// a new goroutine. It is internal/mailbox's Inline, which connection actors use
// too; see there.
func InlineMailbox(budget int) actor.MailboxProducer { return mailbox.Inline(budget) }
