package main

import (
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/tapeloop/tapeloop/graphs/interp"
)

func TestInterpFlagsCoverConfig(t *testing.T) {
	checkFlagsCover(t, interpCommand, interp.Config{}, func(c *cli.Context) (any, error) { return interpSpec(c) }, nil)
}
