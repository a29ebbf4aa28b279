package gak

import "fmt"

// Sizes checked before anything is copied into C memory (host/HOSTS.md
// rule 16). Strings and bytes passed by value cross without a copy and
// libgak weighs them before reading; snapshots, plans' steps and seed
// lists are first copied into C memory by this package (an arena), so
// they are weighed here, from their lengths, before the first byte is
// copied: a million seeds are refused, not copied and then refused. The
// bounds are every host's (host/sql/store.json, generated into
// facts_gen.go): 1 MiB per string, 10,000 items per list, 64 MiB in all;
// BuildPlan bounds the total only (its step-id problems are the
// component's invalid-plan). How each record is weighed is generated with
// its conversion (abi_gen.go: s.snapshot, s.stepDefs, s.taskSeeds).
const (
	maxValue = maxValueBytes
	maxItems = maxListItems
	maxCall  = maxCallBytes
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

func (s *scale) pairs(m map[string]string, what string) error {
	if err := s.count(len(m), what); err != nil {
		return err
	}
	for key, value := range m {
		if err := s.value(len(key), what); err != nil {
			return err
		}
		if err := s.value(len(value), what); err != nil {
			return err
		}
	}
	return nil
}
