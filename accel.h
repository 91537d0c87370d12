// The one header a user includes: tensors, autograd, nn, optim, data and the Accelerator.
#pragma once

#include "accel_config.h"
#include "tensor/creation.h"
#include "tensor/generator.h"
#include "tensor/tensor.h"
#include "autograd/engine.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "collective/communicator.h"
#include "collective/ring_communicator.h"
#if ACCEL_WITH_MPI
#include "collective/mpi_communicator.h"
#include "collective/mpi_environment.h"
#endif
