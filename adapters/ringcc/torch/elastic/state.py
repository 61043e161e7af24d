"""TorchState: a PyTorch training's state for hvd.elastic.run (models,
optimizers, ElasticSamplers and plain objects)."""

from __future__ import annotations

import copy

import torch

from ringcc.elastic import ObjectState
from ringcc.torch import horovod as _hvd
from ringcc.torch.elastic.sampler import ElasticSampler
from ringcc.torch.functions import broadcast_object, broadcast_optimizer_state, broadcast_parameters


class TorchState(ObjectState):
    """State of a PyTorch training process.

    Models and optimizers (any number, as keyword arguments too) are
    committed as deep copies of their state_dict(), restored with
    load_state_dict() and synchronised from rank 0 (broadcast_parameters,
    broadcast_optimizer_state); an ElasticSampler through its state_dict();
    any other keyword argument as a plain object (ObjectState). Each becomes
    an attribute of the state.

    Args:
        model: a torch.nn.Module (optional).
        optimizer: a torch.optim.Optimizer (optional).
        kwargs: more state, e.g. epoch=0, batch=0, sampler=ElasticSampler(...).
    """

    def __init__(self, model=None, optimizer=None, **kwargs):
        kwargs.update(dict(model=model, optimizer=optimizer))
        self._handlers, kwargs = _get_handlers(kwargs)
        for name, handler in self._handlers.items():
            setattr(self, name, handler.value)
        super().__init__(bcast_object=broadcast_object, get_rank=_hvd.rank, **kwargs)

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def sync(self):
        for handler in self._handlers.values():
            handler.sync()
        super().sync()

    def reset(self):
        # An ElasticSampler shares out the remaining samples among the new
        # membership even when the state is not synchronised (only hosts
        # were removed).
        for handler in self._handlers.values():
            if isinstance(handler, SamplerStateHandler):
                handler.value.reset()

    def __setattr__(self, name, value):
        if hasattr(self, name) and name in self._handlers:
            self._handlers[name].set_value(value)
        super().__setattr__(name, value)


class StateHandler:
    def __init__(self, value):
        self.value = value

    def save(self):
        raise NotImplementedError()

    def restore(self):
        raise NotImplementedError()

    def sync(self):
        raise NotImplementedError()

    def set_value(self, value):
        self.value = value
        self.save()


class ModelStateHandler(StateHandler):
    def __init__(self, model):
        super().__init__(model)
        self._saved_model_state = copy.deepcopy(self.value.state_dict())

    def save(self):
        self._saved_model_state = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved_model_state)

    def sync(self):
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class OptimizerStateHandler(StateHandler):
    def __init__(self, optimizer):
        super().__init__(optimizer)
        self._saved_optimizer_state = copy.deepcopy(self.value.state_dict())

    def save(self):
        self._saved_optimizer_state = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved_optimizer_state)

    def sync(self):
        broadcast_optimizer_state(self.value, root_rank=0)


class SamplerStateHandler(StateHandler):
    def __init__(self, sampler):
        super().__init__(sampler)
        self._saved_sampler_state = copy.deepcopy(self.value.state_dict())

    def save(self):
        self._saved_sampler_state = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved_sampler_state)

    def sync(self):
        self.value.load_state_dict(broadcast_object(self.value.state_dict()))


_handler_registry = [
    (torch.nn.Module, ModelStateHandler),
    (torch.optim.Optimizer, OptimizerStateHandler),
    (ElasticSampler, SamplerStateHandler),
]


def get_handler_registry():
    return _handler_registry


def set_handler_registry(registry):
    global _handler_registry
    _handler_registry = registry


def _get_handler(value):
    for handler_type, handler_cls in _handler_registry:
        if isinstance(value, handler_type):
            return handler_cls(value)
    return None


def _get_handlers(kwargs):
    handlers, remainder = {}, {}
    for key, value in kwargs.items():
        handler = _get_handler(value)
        if handler:
            handlers[key] = handler
        else:
            remainder[key] = value
    return handlers, remainder
