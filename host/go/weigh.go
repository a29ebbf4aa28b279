package gak

import "fmt"

// Sizes checked before anything is copied into C memory (host/HOSTS.md
// rule 16). Strings and bytes passed by value cross without a copy and
// libgak weighs them before reading; snapshots, plans' steps and seed
// lists are first copied into C memory by this package (an arena), so
// they are weighed here, from their lengths, before the first byte is
// copied: a million seeds are refused, not copied and then refused. The
// bounds are libgak's (and the Rust host's): 1 MiB per string, 10,000
// items per list, 64 MiB in all; BuildPlan bounds the total only (its
// step-id problems are the component's invalid-plan).
const (
	maxValue = 1 << 20
	maxItems = 10_000
	maxCall  = 64 << 20
)

type scale struct {
	total     int
	totalOnly bool
}

func tooBig(what, why string) error {
	return refused(CodeInvalidInput, what+": "+why)
}

func (s *scale) value(n int, what string) error {
	if !s.totalOnly && n > maxValue {
		return tooBig(what, fmt.Sprintf("a value of %d bytes is longer than the largest the contract accepts (1 MiB)", n))
	}
	s.total += n
	if s.total > maxCall {
		return tooBig(what, "the call's arguments are larger than 64 MiB in all")
	}
	return nil
}

func (s *scale) count(n int, what string) error {
	if !s.totalOnly && n > maxItems {
		return tooBig(what, fmt.Sprintf("a list of %d items is longer than the contract accepts (10,000)", n))
	}
	return nil
}

func (s *scale) strs(list []string, what string) error {
	if err := s.count(len(list), what); err != nil {
		return err
	}
	for _, v := range list {
		if err := s.value(len(v), what); err != nil {
			return err
		}
	}
	return nil
}

func (s *scale) snapshot(snap *Snapshot) error {
	if err := s.value(len(snap.RunID), "snapshot.run_id"); err != nil {
		return err
	}
	if err := s.value(len(snap.Status), "snapshot.status"); err != nil {
		return err
	}
	if err := s.strs(snap.Done, "snapshot.done"); err != nil {
		return err
	}
	if err := s.count(len(snap.Fields), "snapshot.fields"); err != nil {
		return err
	}
	for key, value := range snap.Fields {
		if err := s.value(len(key), "field key"); err != nil {
			return err
		}
		if err := s.value(len(value), "field value"); err != nil {
			return err
		}
	}
	return nil
}

func (s *scale) steps(steps []StepDef) error {
	if err := s.count(len(steps), "steps"); err != nil {
		return err
	}
	for _, step := range steps {
		if err := s.value(len(step.ID), "step id"); err != nil {
			return err
		}
		if err := s.strs(step.DependsOn, "depends_on"); err != nil {
			return err
		}
	}
	return nil
}

func (s *scale) seeds(tasks []TaskSeed) error {
	if err := s.count(len(tasks), "tasks"); err != nil {
		return err
	}
	for _, t := range tasks {
		if err := s.value(len(t.ID), "task id"); err != nil {
			return err
		}
		if err := s.value(len(t.Title), "title"); err != nil {
			return err
		}
		if err := s.strs(t.Deps, "deps"); err != nil {
			return err
		}
	}
	return nil
}
