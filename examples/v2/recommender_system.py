#!/usr/bin/env python3
"""Chapter 05 of the PaddlePaddle book, recommender system, as a PaddlePaddle v2 program on netc: only the
import says netc. MovieLens 1M ratings -> a user's score of a movie: a user's features (embeddings of its
id, gender, age group and job, each through an fc) and a movie's (an embedding of its id through an fc,
its genres as a sparse binary vector through an fc, its title's words through an embedding and
sequence_conv_pool of 3 steps) each made one vector of 200 (fc, Tanh); the score is their cos_sim
scaled by 5, trained on square_error_cost with Adam(1e-4) at batches of 256. Tests after every pass,
saves params_pass_<n>.tar, then predicts a user's rating of a movie as the book does: (score + 5) / 2.

    python examples/v2/recommender_system.py [--passes 1] [--lr 1e-4] [--batch 256] [--user 234]
                                             [--movie 345] [--out DIR] [--seed N]

Data: PaddlePaddle's cache, ~/.cache/paddle/dataset/movielens/ml-1m.zip (netc.v2 downloads nothing;
tests/test_v2_recommender.py writes a small file of that format). docs/v2.md.
"""
from __future__ import annotations

import argparse
import copy
import os
import random

import netc.v2 as paddle

movielens = paddle.dataset.movielens


def id_feature(name, value_range, emb_size):
    """A data layer of ids, its embedding, an fc of the same width (Tanh: fc's default)."""
    ids = paddle.layer.data(name=name, type=paddle.data_type.integer_value(value_range))
    emb = paddle.layer.embedding(input=ids, size=emb_size)
    return paddle.layer.fc(input=emb, size=emb_size)


def user_features():
    parts = [id_feature("user_id", movielens.max_user_id() + 1, 32),
             id_feature("gender_id", 2, 16),
             id_feature("age_id", len(movielens.age_table), 16),
             id_feature("job_id", movielens.max_job_id() + 1, 16)]
    return paddle.layer.fc(input=parts, size=200, act=paddle.activation.Tanh())


def movie_features():
    movie = id_feature("movie_id", movielens.max_movie_id() + 1, 32)
    genres = paddle.layer.data(name="category_id",
                               type=paddle.data_type.sparse_binary_vector(len(movielens.movie_categories())))
    genres_fc = paddle.layer.fc(input=genres, size=32)
    title = paddle.layer.data(name="movie_title",
                              type=paddle.data_type.integer_value_sequence(len(movielens.get_movie_title_dict())))
    title_emb = paddle.layer.embedding(input=title, size=32)
    title_conv = paddle.networks.sequence_conv_pool(input=title_emb, hidden_size=32, context_len=3)
    return paddle.layer.fc(input=[movie, genres_fc, title_conv], size=200, act=paddle.activation.Tanh())


FEEDING = {"user_id": 0, "gender_id": 1, "age_id": 2, "job_id": 3, "movie_id": 4, "category_id": 5,
           "movie_title": 6, "score": 7}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passes", type=int, default=1)
    ap.add_argument("--lr", type=float, default=1e-4, help="Adam's learning rate (the book's 1e-4)")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--user", type=int, default=234)
    ap.add_argument("--movie", type=int, default=345)
    ap.add_argument("--out", default=".", help="where params_pass_<n>.tar go")
    ap.add_argument("--seed", type=int, default=None, help="seed Python's random (the shuffle's order)")
    args = ap.parse_args()
    if args.seed is not None:
        random.seed(args.seed)

    paddle.init(use_gpu=False)
    score = paddle.layer.cos_sim(a=user_features(), b=movie_features(), size=1, scale=5)
    cost = paddle.layer.square_error_cost(input=score,
                                          label=paddle.layer.data(name="score", type=paddle.data_type.dense_vector(1)))
    parameters = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost=cost, parameters=parameters,
                                 update_equation=paddle.optimizer.Adam(learning_rate=args.lr))
    test_reader = paddle.batch(movielens.test(), batch_size=args.batch)

    def on_event(event):
        if isinstance(event, paddle.event.EndIteration) and event.batch_id % 100 == 0:
            print(f"pass {event.pass_id}, batch {event.batch_id}: cost {event.cost:.4f}")
        if isinstance(event, paddle.event.EndPass):
            result = trainer.test(reader=test_reader, feeding=FEEDING)
            print(f"test after pass {event.pass_id}: cost {result.cost:.4f}")
            with open(os.path.join(args.out, f"params_pass_{event.pass_id}.tar"), "wb") as f:
                trainer.save_parameter_to_tar(f)

    trainer.train(reader=paddle.batch(paddle.reader.shuffle(movielens.train(), buf_size=8192),
                                      batch_size=args.batch),
                  event_handler=on_event, feeding=FEEDING, num_passes=args.passes)

    user, movie = movielens.user_info()[args.user], movielens.movie_info()[args.movie]
    feeding = copy.copy(FEEDING)
    del feeding["score"]
    prediction = paddle.infer(output_layer=score, parameters=parameters, input=[user.value() + movie.value()],
                              feeding=feeding)
    print(f"user {args.user} rates movie {args.movie} ({movie.title.strip()}): {(prediction[0][0] + 5) / 2:.2f}")
    print(f"{len(parameters.names())} parameters: {sum(parameters[n].size for n in parameters.names())} values")


if __name__ == "__main__":
    main()
