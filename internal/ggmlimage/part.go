// Package ggmlimage runs SD3's parts as ggml graphs on llama.cpp's ggml,
// the engine build that text runs on (internal/tensor binds it). Weights
// come from GGUF files in diffusers' names (internal/sd3 lists them); each
// part is one file, and the parts of a Backend share one ggml backend.
package ggmlimage

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/genq/genq/internal/gguf"
	"github.com/genq/genq/internal/sd3"
	"github.com/genq/genq/internal/tensor"
)

// part is one loaded GGUF file: its weights on a ggml backend.
type part struct {
	path string
	be   *tensor.Backend
	w    *tensor.Weights
	// mu makes one graph at a time, shared by all parts of a Backend: the
	// backend lays out every graph in one compute buffer, and its CPU
	// threads are one pool.
	mu *sync.Mutex
	// ownsBackend: a part opened on its own (OpenCLIP and the like) closes
	// its backend with its weights.
	ownsBackend bool
}

// openPart reads a part's configuration from its file's metadata
// (configOf), checks the file against the tensors that configuration has,
// then loads it. A missing or misshapen tensor fails before anything is
// allocated, naming the tensor in one line. layout, when not nil, says
// how to lay the weights out on the backend (tensor.Layout: matrices side
// by side, bfloat16 or float32).
func openPart[C any](path string, on placement, configOf func(*gguf.File) (C, error), tensors func(C) []sd3.Spec, layout func(C, *tensor.Backend) tensor.Layout) (p *part, cfg C, err error) {
	head, err := sd3.ReadHeader(path)
	if err != nil {
		return nil, cfg, err
	}
	if cfg, err = configOf(head); err != nil {
		return nil, cfg, fmt.Errorf("%s: %w", path, err)
	}
	if err := sd3.CheckShapes(path, head.Tensors, tensors(cfg)); err != nil {
		return nil, cfg, err
	}
	p = &part{path: path, be: on.be, mu: on.mu}
	if p.be == nil {
		if p.be, err = tensor.Open(tensor.Options{Device: tensor.DeviceCPU, Threads: on.threads, BLAS: on.blas, Log: on.log}); err != nil {
			return nil, cfg, err
		}
		p.mu, p.ownsBackend = new(sync.Mutex), true
	}
	var l tensor.Layout
	if layout != nil {
		l = layout(cfg, p.be)
	}
	if p.w, err = p.be.LoadWeights(path, head, l); err != nil {
		p.close()
		return nil, cfg, err
	}
	return p, cfg, nil
}

// placement is where a part's weights go: a Backend's shared ggml backend,
// or (be nil) a CPU backend of the part's own with threads threads.
type placement struct {
	be      *tensor.Backend
	mu      *sync.Mutex
	threads int
	log     *slog.Logger
	fresh   bool // Config.FreshStepGraphs
	// bfloat16: the largest products' float16 weights as bfloat16
	// (tensor.Layout, Config.BFloat16).
	bfloat16 bool
	// blas is tensor.Options.BLAS for a part that opens its own backend.
	blas string
}

func (p *part) close() {
	if p == nil {
		return
	}
	p.w.Close()
	p.w = nil
	if p.ownsBackend {
		p.be.Close()
	}
	p.be = nil
}

// graph starts a computation; call it holding p.mu.
func (p *part) graph() *tensor.Graph { return p.be.NewGraph() }

// weight is a tensor openPart has checked to be there.
func (p *part) weight(g *tensor.Graph, name string) tensor.Tensor { return g.Weight(p.w, name) }

// linear is torch's Linear over the first dimension.
func (p *part) linear(g *tensor.Graph, prefix string, x tensor.Tensor) tensor.Tensor {
	return p.weight(g, prefix+"weight").MulMat(x).Add(p.weight(g, prefix+"bias"))
}

// layerNorm is torch's LayerNorm over the first dimension, with the
// weight and bias called prefix+"weight" and prefix+"bias".
func (p *part) layerNorm(g *tensor.Graph, prefix string, x tensor.Tensor, eps float32) tensor.Tensor {
	return x.Norm(eps).Mul(p.weight(g, prefix+"weight")).Add(p.weight(g, prefix+"bias"))
}

// geluTanh is GELU's tanh approximation (torch's approximate="tanh",
// transformers' gelu_new).
func geluTanh(x tensor.Tensor) tensor.Tensor { return x.GELUTanh() }
