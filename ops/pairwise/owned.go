package pairwise

import "github.com/tapeloop/tapeloop/ops/internal/opkit"

// The pieces every op is made of, shared with package ops.
type (
	owned     = opkit.Owned
	stoppable = opkit.Stoppable
	launch    = opkit.Launch
)
