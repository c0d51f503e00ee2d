package observe

import (
	"context"

	"github.com/mrtr-go/mrtr"
)

// Observers tells every Observer in it of every event, in order.
type Observers []mrtr.Observer

// Resumed passes e on.
func (os Observers) Resumed(ctx context.Context, e mrtr.ResumeEvent) {
	for _, o := range os {
		o.Resumed(ctx, e)
	}
}

// Paused passes e on.
func (os Observers) Paused(ctx context.Context, e mrtr.PauseEvent) {
	for _, o := range os {
		o.Paused(ctx, e)
	}
}

// StoreCalled passes e on.
func (os Observers) StoreCalled(ctx context.Context, e mrtr.StoreEvent) {
	for _, o := range os {
		o.StoreCalled(ctx, e)
	}
}

// Ended passes e on.
func (os Observers) Ended(ctx context.Context, e mrtr.EndEvent) {
	for _, o := range os {
		o.Ended(ctx, e)
	}
}
