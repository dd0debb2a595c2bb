package engine

// Settings is the engine's configuration as a user writes it, one field
// per setting, with everything the front ends say of it in its tags: the
// command-line flag (flag), the C ABI's JSON key and Python keyword
// (json; "-": the C ABI names it otherwise), the environment variable
// (env), the default the command line shows (default) and its help
// (help). The CLI makes its engine flags from these tags, and the C ABI's
// engine fields and the Python package's defaults are checked against
// them. Engine holds the same settings parsed.
type Settings struct {
	MemLimit string `flag:"mem-limit" json:"mem_limit" env:"TAPELOOP_MEM_LIMIT" help:"memory the planned buffers may take, e.g. 512MiB or 2GB (default: half of available memory, within the cgroup and ulimit -v/-d; a value above what the cgroup or ulimit -v/-d leaves is lowered to that, with a warning)"`
	Batch    int    `flag:"batch" json:"batch" help:"batch size, overriding the planner"`
	Device   string `flag:"device" json:"device" env:"TAPELOOP_DEVICE" default:"cpu" help:"where to run: cpu or cuda"`
	// Devices is a list of GPUs; the C ABI takes one, its key "gpu".
	Devices string `flag:"devices" json:"-" env:"TAPELOOP_DEVICES" help:"with --device cuda: the GPUs to spread batches over, e.g. 0,1,2,3 (default 0)"`
	Dtype   string `flag:"dtype" json:"dtype" default:"float32" help:"element type of the computation: float32 or float64"`
}

// Engine parses the settings into an Engine, as every front end does: an
// empty MemLimit is the default limit (DefaultMemLimit), Devices a
// comma-separated list of GPU ordinals, Batch 0 the planner's choice.
// Its errors name the settings by their flags and match ErrEngine;
// Engine.Validate checks the rest (the device and dtype names, the
// batch's bounds).
func (s Settings) Engine() (Engine, error) {
	e := Engine{Device: s.Device, Batch: s.Batch, Dtype: s.Dtype}
	if s.Devices != "" {
		gpus, err := ParseGPUs(s.Devices)
		if err != nil {
			return e, engineErrorf("--devices: %v", err)
		}
		e.GPUs = gpus
	}
	if s.MemLimit != "" {
		b, err := ParseSize(s.MemLimit)
		if err != nil {
			return e, engineErrorf("--mem-limit: %v", err)
		}
		e.MemLimit = b
	}
	return e, nil
}
