package conformance

import (
	"context"
	"errors"
	"fmt"

	gak "github.com/gak-kernel/gak/host/go"
)

// Vector calls → the Go package's typed calls, and answers → the vectors'
// JSON: every exported function through the table generated from the WIT
// (exports_gen.go, as the other hosts' runners map them), and here the
// host-level calls every runner writes by hand — sink.write-fenced (a body
// in the call's transaction, and the ways a body may misbehave), sink.read,
// and the 0.1 form of taskboard.list (no limit: the whole board).

// extra is what a call reported besides its answer: the code a reenter
// body's inner call answered.
type extra struct {
	inner *string
}

// dispatch runs one vector call: (answer, refusal) or a malformed step.
func dispatch(ctx context.Context, k *gak.Kernel, name string, args any, ex *extra) (any, error, error) {
	answer, refusal, err := call(ctx, k, name, args, ex)
	var inv *invalid
	if errors.As(err, &inv) {
		return nil, &gak.Refused{Code: gak.CodeInvalidInput, Message: inv.why}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: bad args: %v", name, err)
	}
	return answer, refusal, nil
}

// call maps one vector call onto the typed API: (answer, refusal), or an
// *invalid / *malformed argument error.
func call(ctx context.Context, k *gak.Kernel, name string, a any, ex *extra) (any, error, error) {
	switch name {
	case "sink.write-fenced":
		return writeFenced(ctx, k, a, ex)
	case "sink.read":
		return sinkRead(ctx, k, a)
	case "taskboard.list":
		if _, ok := field(a, "limit"); !ok {
			return wholeBoard(ctx, k, a)
		}
	}
	if f, ok := exports[name]; ok {
		return f(ctx, k, a)
	}
	return nil, nil, &malformed{"unknown call " + name}
}

func writeFenced(ctx context.Context, k *gak.Kernel, a any, ex *extra) (any, error, error) {
	resource, err := readString(arg(a, "resource"), "resource")
	if err != nil {
		return nil, nil, err
	}
	fail, err := readBool(arg(a, "fail"), "fail")
	if err != nil {
		return nil, nil, err
	}
	if _, ok := field(a, "fence"); !ok {
		return nil, nil, &malformed{"missing fence"}
	}
	fence, err := readU64(arg(a, "fence"), "fence")
	if err != nil {
		return nil, nil, err
	}
	kind, err := bodyKind(a)
	if err != nil {
		return nil, nil, err
	}
	var inner string
	werr := k.Sideeffect().WriteFenced(ctx, resource, fence, sinkBody(k, kind, resource, fail, &inner))
	if kind == "reenter" {
		ex.inner = &inner
	}
	return nil, werr, nil
}

func sinkRead(ctx context.Context, k *gak.Kernel, a any) (any, error, error) {
	resource, err := readString(arg(a, "resource"), "resource")
	if err != nil {
		return nil, nil, err
	}
	seen, err := k.Sideeffect().SinkSeen(ctx, resource)
	if err != nil {
		return nil, err, nil
	}
	var marker string
	err = k.WithDownstream(ctx, func(_ context.Context, down *gak.Downstream) error {
		m, _, err := down.Get(resource)
		marker = m
		return err
	})
	if err != nil {
		return nil, err, nil
	}
	return obj{"seen-fence": num(seen), "marker": marker}, nil, nil
}

// wholeBoard is the 0.1 form of taskboard.list: the whole board as an
// array, page by page.
func wholeBoard(ctx context.Context, k *gak.Kernel, a any) (any, error, error) {
	state, err := optional(readTaskState)(arg(a, "state"), "state")
	if err != nil {
		return nil, nil, err
	}
	all := []any{}
	after := ""
	for {
		p, err := k.Taskboard().List(ctx, state, after, 1000)
		if err != nil {
			return nil, err, nil
		}
		all = append(all, writeList(p.Items, writeTask)...)
		if p.Next == "" {
			return all, nil, nil
		}
		after = p.Next
	}
}

// sinkBody is the vectors' reference body (append "m" to the resource's
// marker, then fail if asked to) and the ways a body may misbehave in the
// host-protocol cases (tests/host-protocol/README.md).
func sinkBody(k *gak.Kernel, kind, key string, fail bool, inner *string) gak.SinkBody {
	return func(ctx context.Context, down *gak.Downstream) error {
		if kind == "reenter" {
			answer := "ok"
			if _, err := k.Sideeffect().SinkSeen(ctx, key); err != nil {
				answer = gak.Code(err)
			}
			*inner = answer
		}
		appended := func() error {
			marker, _, err := down.Get(key)
			if err != nil {
				return err
			}
			return down.Put(key, marker+"m")
		}()
		if kind != "swallow" && appended != nil {
			return appended
		}
		switch kind {
		case "raw-commit":
			if _, err := down.Exec("COMMIT"); err != nil {
				return err
			}
		case "raw-rollback":
			if _, err := down.Exec("ROLLBACK"); err != nil {
				return err
			}
		case "raw-error":
			_, _ = down.Exec("SELECT * FROM gak_no_such_table")
		}
		if fail {
			return errors.New("the reference body fails on purpose")
		}
		return nil
	}
}

func bodyKind(a any) (string, error) {
	kind, err := readString(arg(a, "body"), "body")
	if err != nil {
		return "", err
	}
	switch kind {
	case "":
		return "append", nil
	case "append", "swallow", "reenter", "raw-commit", "raw-rollback", "raw-error":
		return kind, nil
	}
	return "", &malformed{"body: unknown kind " + kind}
}
